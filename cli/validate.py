"""`dl validate`: check every file a dataset (selection) needs; exit 1 when anything is wrong."""

import click
from rich.console import Console
from rich.progress import Progress

from .options import parse_episodes, plugin_options


@click.command()
@click.argument("root")
@click.option("--source", default="local", show_default=True, help="Source plugin that reads ROOT.")
@click.option("--source-option", multiple=True, metavar="KEY=VALUE", help="An option of the source plugin.")
@click.option("--decoder", default="cpu", show_default=True, help="Decoder plugin that opens the videos.")
@click.option("--episodes", help="Episodes to check: indices and inclusive ranges, e.g. 0,3-6,8 [all].")
def validate(root, source, source_option, decoder, episodes):
    """Check the LeRobot v3.0 dataset at ROOT file by file: metadata consistency, every data parquet
    (readable, row counts, global indices, frame_index, timestamps against fps), every video (opens, codec
    and frame rate against info.json, long enough for its episodes, last needed frame decodes).

    Prints each problem with the file and episodes it concerns. Exit status: 0 when nothing is wrong (warnings
    allowed), 1 when something is, 2 when the dataset cannot be opened at all.
    """
    from dl.contracts.errors import format_indices
    from dl.format.validation import validate as check
    from dl.host.assembly import build_decoder, open_dataset

    meta = open_dataset(root, source, plugin_options("source", source, source_option, "--source-option"))
    selection = parse_episodes(episodes) if episodes else None
    console = Console(stderr=True)
    with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("checking files", total=None)
        findings = check(meta, build_decoder(decoder), selection,
                         progress=lambda done, total: bar.update(task, completed=done, total=total))
    out = Console(soft_wrap=True, highlight=False)
    for f in findings:
        where = f"{f.path}: " if f.path and f.path not in f.message else ""
        eps = f" [episodes {format_indices(list(f.episodes))}]" if f.episodes else ""
        out.print(f"{f.severity}: {where}{f.message}{eps}", markup=False)
    errors = [f for f in findings if f.severity == "error"]
    broken = sorted({e for f in errors for e in f.episodes})
    checked = len(meta.episodes) if selection is None else len(selection)
    if errors:
        good = sorted(set(selection or meta.episodes) - set(broken))
        out.print(f"{len(errors)} error(s) in {checked} episode(s) of {meta.source.url}; episodes without errors: "
                  f"--episodes {format_indices(good) or '(none)'}", markup=False)
        raise SystemExit(1)
    out.print(f"ok: {checked} episode(s) of {meta.source.url} checked, {len(findings)} warning(s)", markup=False)
