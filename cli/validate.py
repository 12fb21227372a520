"""`dl validate`: check every file a dataset (selection) needs; exit 1 when anything is wrong."""

import warnings

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
@click.option("--tolerance-s", type=click.FloatRange(0, min_open=True), default=1e-4, show_default=True,
              help="Check the timestamps against this tolerance, as `dl run --tolerance-s` serves them (LeRobot's "
                   "tolerance_s); the report gives the value that serves every episode.")
@click.option("--frame-pairing", type=click.Choice(["timestamp", "row"]), default="timestamp", show_default=True,
              help="Check the rows' frames as `dl run --frame-pairing` pairs them.")
@click.option("--strict", is_flag=True, help="Count NaN or inf in float features as errors (as `dl run --strict` "
              "refuses them), not warnings.")
@click.option("--quick", is_flag=True, help="Decode each episode's first and last video frame and image only, "
              "instead of every one: faster, but a corrupt payload between them goes unseen.")
def validate(root, source, source_option, decoder, episodes, tolerance_s, frame_pairing, strict, quick):
    """Check the LeRobot v3.0 dataset at ROOT file by file, with every check `dl run` makes as it reads: metadata
    (info.json's fps, features and totals, each episode's index range and video spans), every data parquet
    (readable, each episode's rows found by global index, column types and shapes against info.json, frame_index,
    timestamps against fps and --tolerance-s, task indices, NaN/inf), every image stored in the data (decoded), every
    video (opens, codec, frame rate and frame size against info.json and the camera's other files, spans inside the
    file, every frame decoded, each episode's first and last frame at the time meta/episodes gives).

    Prints each problem with the file and episodes it concerns, then what was decoded and how long it took.
    Exit status: 0 when nothing would fail or be served wrong (warnings allowed: LeRobot serves those data as
    stored), 1 when something would, 2 when the dataset cannot be opened at all.
    """
    from dl.contracts.errors import format_indices
    from dl.format.validation import validate as check
    from dl.host.assembly import build_decoder, open_dataset

    selection = parse_episodes(episodes) if episodes is not None else None
    with warnings.catch_warnings(record=True) as loading:
        warnings.simplefilter("always")
        meta = open_dataset(root, source, plugin_options("source", source, source_option, "--source-option"))
    out = Console(soft_wrap=True, highlight=False)
    chosen = selection if selection is not None else list(meta.episodes)
    what = "each episode's first and last video frame and image" if quick else "every video frame and image"
    out.print(f"checking {len(chosen)} episode(s) of {meta.source.url}, decoding {what} (--tolerance-s "
              f"{tolerance_s}{', --strict' if strict else ''})", markup=False)
    console = Console(stderr=True)
    with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("checking files", total=None)
        result = check(meta, build_decoder(decoder), selection, tolerance_s=tolerance_s,
                       frame_pairing=frame_pairing, strict=strict,
                       decode="ends" if quick else "all",
                       progress=lambda done, total: bar.update(task, completed=done, total=total))
    lines = [f"warning: {w.message}" for w in loading] + [
        f"{f.severity}: {f.path + ': ' if f.path and f.path not in f.message else ''}{f.message}"
        f"{f' [episodes {format_indices(list(f.episodes))}]' if f.episodes else ''}" for f in result.findings]
    for line in dict.fromkeys(lines):  # each text once
        out.print(line, markup=False)
    warned = len([line for line in dict.fromkeys(lines) if line.startswith("warning: ")])
    decoded = result.frames_decoded + result.images_decoded
    rate = f" ({decoded / result.decode_s:,.0f} per second)" if result.decode_s and decoded else ""
    out.print(f"decoded {result.frames_decoded:,} video frame(s) and {result.images_decoded:,} image(s) in "
              f"{result.decode_s:.1f} s{rate}", markup=False)
    errors = result.errors
    if errors:
        out.print(f"{len(errors)} error(s), {warned} warning(s) in {len(result.episodes)} episode(s) of "
                  f"{meta.source.url}; episodes without errors: --episodes "
                  f"{format_indices(result.good_episodes()) or '(none)'}", markup=False)
        raise SystemExit(1)
    out.print(f"ok: {len(result.episodes)} episode(s) of {meta.source.url} checked, {warned} warning(s)", markup=False)
