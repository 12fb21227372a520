"""A click command whose `--help` lists its options under headings (`GroupedCommand`), for commands with many."""

import click


class GroupedCommand(click.Command):
    """A command whose options print under `groups` (`{heading: [option names]}`, in order); options in no group
    print last under "Other options"."""

    def __init__(self, *args, groups: dict[str, list[str]], **kwargs):
        self.groups = groups
        super().__init__(*args, **kwargs)

    def format_options(self, ctx, formatter) -> None:
        records = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                records[param.name] = record
        placed = set()
        for heading, names in self.groups.items():
            rows = [records[n] for n in names if n in records]
            placed.update(names)
            if rows:
                with formatter.section(heading):
                    formatter.write_dl(rows)
        rest = [record for name, record in records.items() if name not in placed]
        if rest:
            with formatter.section("Other options"):
                formatter.write_dl(rest)
