"""`dl info`: a dataset summary, including the codec info.json claims vs the one in the files."""

import click
from rich.console import Console
from rich.table import Table

from .options import plugin_options


@click.command()
@click.argument("root")
@click.option("--source", default="local", show_default=True, help="Source plugin that reads ROOT.")
@click.option("--source-option", multiple=True, metavar="KEY=VALUE", help="An option of the source plugin.")
@click.option("--decoder", default="cpu", show_default=True, help="Decoder plugin that probes the videos.")
def info(root, source, source_option, decoder):
    """Summarize the LeRobot v3.0 dataset at ROOT: episodes, frames, fps, features, cameras (codec in
    info.json vs in the video stream), tasks, and missing files."""
    from dl.contracts.decoder import codec_matches
    from dl.contracts.errors import format_indices
    from dl.host.assembly import build_decoder, open_dataset

    meta = open_dataset(root, source, plugin_options("source", source, source_option, "--source-option"))
    src = meta.source
    probe = build_decoder(decoder)
    episodes = list(meta.episodes.values())
    missing = meta.missing_files(episodes)
    broken = sorted({e for eps in missing.values() for e in eps})
    console = Console()
    console.print(f"[bold]{src.url}[/]  LeRobot {meta.info['codebase_version']}, robot "
                  f"{meta.info.get('robot_type')}", highlight=False)
    console.print(f"{len(episodes)} episodes, {meta.total_frames} frames at {meta.fps} fps "
                  f"({meta.total_frames / meta.fps / 60:.1f} min), {len(meta.tasks)} task(s)")
    features = Table(title="features")
    for column in ("key", "dtype", "shape"):
        features.add_column(column)
    for key, feature in meta.features.items():
        features.add_row(key, feature.get("dtype"), str(feature.get("shape")))
    console.print(features)
    cameras = Table(title="cameras")
    for column in ("key", "codec (info.json)", "codec (stream)", "size", "files"):
        cameras.add_column(column)
    for key in meta.video_keys:
        files = sorted({e.videos[key].path for e in episodes})
        present = [f for f in files if f not in missing]
        stream = probe.probe(src, present[0]) if present else None
        claimed = meta.info_codec(key)
        codec = "-" if stream is None else stream["codec"]
        if stream and claimed and not codec_matches(claimed, codec):
            codec = f"[yellow]{codec} (info.json disagrees: the stream is what gets decoded)[/]"
        size = "-" if stream is None else f"{stream['width']}x{stream['height']}"
        cameras.add_row(key, str(claimed), codec, size, f"{len(present)}/{len(files)}")
    console.print(cameras)
    if missing:
        console.print(f"[red]{len(missing)} missing file(s)[/], needed by episode(s) {format_indices(broken)}:")
        for path in missing:
            console.print(f"  {path}", highlight=False)
        ok = sorted(set(meta.episodes) - set(broken))
        console.print(f"episodes with all files: [green]--episodes {format_indices(ok)}[/]", highlight=False)
    else:
        console.print("[green]all data and video files present[/] (their contents are not checked here: "
                      f"`dl validate {root}` opens every file)", highlight=False)
