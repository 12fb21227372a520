"""`dl plugins`: every registered plugin with its options, and the plugins that failed to load."""

import json

import click
from rich.console import Console
from rich.table import Table


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def plugins(as_json):
    """List registered plugins: kind, name, providing distribution and version, options (with their
    defaults; set them with --source-option / --loader-option / --decoder-option / --scheduler-option
    KEY=VALUE), description.

    Plugins come from the `dl` entry-point group; built-ins register the same way. Set
    DL_DISABLE_PLUGINS=name,... to block some, DL_STRICT_PLUGINS=1 to make a broken plugin fatal.
    """
    from dl.host.manager import get_plugins

    loaded = get_plugins()
    entries = loaded.registry.entries()
    if as_json:
        click.echo(json.dumps({
            "plugins": [{"kind": e.kind, "name": e.name, "distribution": e.distribution, "version": e.version,
                         "module": e.module, "description": e.description,
                         "options": [o.to_dict() for o in e.options.options],
                         "accepts_any_option": e.options.open} for e in entries],
            "errors": loaded.errors,
        }, indent=2))
        return
    table = Table(title="dl plugins")
    for column in ("kind", "name", "distribution", "version"):
        table.add_column(column)
    for column in ("options", "description"):  # wrapped, never cut short: a narrow terminal still shows all
        table.add_column(column, overflow="fold")
    for e in entries:
        table.add_row(e.kind, e.name, e.distribution, e.version, e.options.describe(), e.description)
    console = Console()
    console.print(table)
    for error in loaded.errors:
        console.print(f"[red]failed to load:[/] {error}", highlight=False)
