"""`dl info`: a dataset summary, including the codec info.json claims vs the one in the files, and how its
timestamps are served."""

import json
import time
from contextlib import nullcontext

import click
import numpy as np
from rich.markup import escape
from rich.table import Table

from .console import make_console
from .options import plugin_options

LARGE_EPISODES = 100_000
"""From this many episodes on, `dl info` shows its progress (`dl.bench.progress.rich_progress`: bars on a terminal,
else a line per phase) and where reading the metadata went (`dl.format.load_times`)."""


@click.command()
@click.argument("root")
@click.option("--source", default="local", show_default=True, help="Source plugin that reads ROOT.")
@click.option("--source-option", multiple=True, metavar="KEY=VALUE", help="An option of the source plugin.")
@click.option("--decoder", default="cpu", show_default=True, help="Decoder plugin that probes the videos.")
@click.option("--tolerance-s", type=click.FloatRange(0, min_open=True), default=1e-4, show_default=True,
              help="Say whether the first episode's timestamps are served with this tolerance (LeRobot's "
                   "tolerance_s, as `dl run --tolerance-s`).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout, for scripts (the tables "
              "go to stderr).")
def info(root, source, source_option, decoder, tolerance_s, as_json):
    """Summarize the LeRobot v3.0 dataset at ROOT: episodes, frames, fps, features, cameras (video streams with the
    codec info.json claims vs the stream's, or images stored in the data files), features dl leaves out, tasks,
    missing files, episodes whose metadata is wrong, and how the first complete episode's timestamps are served
    under --tolerance-s. Reads metadata, one data file and one video per camera; `dl validate` checks every file."""
    from dl.bench.phase import no_progress
    from dl.bench.progress import rich_progress
    from dl.host.assembly import open_dataset

    t0 = time.perf_counter()
    meta = open_dataset(root, source, plugin_options("source", source, source_option, "--source-option"))
    console = make_console(stderr=as_json)
    large = len(meta.columns) >= LARGE_EPISODES
    if large:
        parts = ", ".join(f"{k.replace('_', ' ')} {v:.2f} s" for k, v in meta.load_times.seconds.items())
        console.print(f"{len(meta.columns):,} episodes opened in {time.perf_counter() - t0:.1f} s, of which {parts}",
                      highlight=False, markup=False)
    with rich_progress("dl info", console) if large else nullcontext(no_progress) as progress:
        summary = _summarize(meta, root, decoder, tolerance_s, console, progress)
    if as_json:
        click.echo(json.dumps(summary))


def _summarize(meta, root: str, decoder: str, tolerance_s: float, console, progress) -> dict:
    """Print `dl info`'s summary of `meta` on `console`, reporting its phases to `progress`; returns the summary
    `--json` prints."""
    from dl.contracts.decoder import codec_matches
    from dl.contracts.errors import format_indices
    from dl.format.episodes import EpisodeSelection
    from dl.host.assembly import build_decoder

    src = meta.source
    probe = build_decoder(decoder)
    columns = meta.columns
    episodes = EpisodeSelection(columns, np.arange(len(columns), dtype=np.int64))
    progress("checking files", 0, 1)
    missing = meta.missing_files(episodes)
    broken = sorted({e for eps in missing.values() for e in eps})
    progress("checking files", 1, 1)
    summary = {"root": src.url, "codebase_version": meta.info["codebase_version"], "robot_type": meta.info.get(
        "robot_type"), "episodes": len(episodes), "info_total_episodes": meta.info.get("total_episodes"),
        "frames": meta.total_frames, "fps": meta.fps, "tasks": len(meta.tasks), "features": [], "cameras": []}
    console.print(f"[bold]{escape(src.url)}[/]  LeRobot {escape(str(meta.info['codebase_version']))}, robot "
                  f"{escape(str(meta.info.get('robot_type')))}", highlight=False)
    total = meta.info.get("total_episodes")
    stale = f" (meta/info.json says {total})" if isinstance(total, int) and total != len(episodes) else ""
    console.print(f"{len(episodes)} episodes{stale}, {meta.total_frames} frames at {meta.fps} fps "
                  f"({meta.total_frames / meta.fps / 60:.1f} min), {len(meta.tasks)} task(s)", markup=False)
    features = Table(title="features")
    for column in ("key", "dtype", "shape", "served"):
        features.add_column(column)
    for key, feature in meta.features.items():
        served = (f"[yellow]no: {escape(meta.left_out[key])}[/]" if key in meta.left_out else
                  f"yes: {meta.depth[key].describe()}, float32 [1, H, W]" if key in meta.depth else "yes")
        features.add_row(escape(key), escape(str(feature.get("dtype"))), escape(str(feature.get("shape"))), served)
        summary["features"].append({"key": key, "dtype": feature.get("dtype"), "shape": feature.get("shape"),
                                    "served": key not in meta.left_out, "left_out": meta.left_out.get(key)})
    console.print(features)
    cameras = Table(title="cameras")
    for column in ("key", "stored as", "codec (info.json)", "codec (stream)", "size", "files"):
        cameras.add_column(column)
    progress("probing cameras", 0, len(meta.video_keys))
    for done, key in enumerate(meta.video_keys):
        files = sorted(columns.video_paths[key][f] for f in np.unique(columns.video_file[key]).tolist())
        present = [f for f in files if f not in missing]
        stream = probe.probe(src, present[0]) if present else None
        claimed = meta.info_codec(key)
        codec = "-" if stream is None else stream["codec"]
        if stream and claimed and not codec_matches(claimed, codec):
            codec = f"[yellow]{escape(codec)} (info.json disagrees: the stream is what gets decoded)[/]"
        size = "-" if stream is None else f"{stream['width']}x{stream['height']}"
        kind = "video (depth, 12-bit codes)" if key in meta.depth else "video"
        cameras.add_row(escape(key), kind, escape(str(claimed)), codec, size, f"{len(present)}/{len(files)}")
        summary["cameras"].append({"key": key, "stored_as": kind, "codec_info_json": claimed,
                                   "codec_stream": None if stream is None else stream["codec"],
                                   "size": None if stream is None else [stream["width"], stream["height"]],
                                   "files_present": len(present), "files": len(files)})
        progress("probing cameras", done + 1, len(meta.video_keys))
    for key in meta.image_keys:
        cameras.add_row(key, "images in the data files", "-", "-", "x".join(map(str, meta.features[key]["shape"])),
                        "-")
        summary["cameras"].append({"key": key, "stored_as": "images in the data files"})
    console.print(cameras)
    progress("checking episodes", 0, 1)
    problems = meta.problems
    progress("checking episodes", 1, 1)
    if problems:
        console.print(f"[red]{len(problems)} episode(s) with wrong metadata[/] (refused when selected):",
                      highlight=False)
        for e, why in list(problems.items())[:20]:
            console.print(f"  episode {e}: {why}", highlight=False, markup=False)
    if missing:
        console.print(f"[red]{len(missing)} missing file(s)[/], needed by episode(s) {format_indices(broken)}:")
        for path in missing:
            console.print(f"  {path}", highlight=False, markup=False)
        ok = sorted(set(columns.index.tolist()) - set(broken) - set(problems))
        console.print(f"episodes with all files: [green]--episodes {format_indices(ok)}[/]", highlight=False)
    else:
        console.print("[green]all data and video files present[/] (their contents are not checked here: "
                      f"`dl validate {root}` opens every file)", highlight=False)
    complete = np.flatnonzero(~np.isin(columns.index, np.asarray([*broken, *problems], dtype=np.int64)))
    summary.update(problems={str(e): why for e, why in problems.items()}, missing_files=missing,
                   complete_episodes=columns.index[complete].tolist())
    if len(complete):
        summary["timestamps"] = _timestamps(meta, episodes[int(complete[0])], tolerance_s)
        console.print(summary["timestamps"], highlight=False, markup=False)
    return summary


def _timestamps(meta, episode, tolerance_s: float) -> str:
    """How `episode`'s timestamps are served under `tolerance_s` (one line)."""
    import numpy as np

    from dl.contracts.errors import DlError
    from dl.format.tabular import read_episode_arrays
    from dl.format.timestamp_checks import drift, suggest_tolerance, timestamp_gaps

    try:
        ts = read_episode_arrays(meta, episode, ["timestamp"])["timestamp"].astype(np.float64).reshape(-1)
    except DlError as exc:
        return f"timestamps: episode {episode.index}'s rows do not read: {exc}"
    offset = float(np.median(ts - np.arange(len(ts)) / meta.fps)) if len(ts) else 0.0
    spacing = float(np.median(np.diff(ts))) if len(ts) > 1 else 1 / meta.fps
    kind = ("frame_index / fps" if abs(offset) < 1e-4 and abs(spacing * meta.fps - 1) < 1e-4 else
            f"recorded: start {ts[0]:.6f} s, median spacing {spacing:.6f} s ({(spacing * meta.fps - 1) * 100:+.2f}% "
            f"from 1/fps)")
    found = timestamp_gaps(meta, episode, ts)
    if found is None:
        return f"timestamps (episode {episode.index}): {kind}; no cameras to match them to"
    gap = found[0]
    moved = drift(meta, episode, found[2], ts)
    verdict = (f"served with --tolerance-s {tolerance_s}" if gap < tolerance_s else
               f"[needs --tolerance-s {suggest_tolerance(gap)}; refused with {tolerance_s}]"
               if suggest_tolerance(gap) < 0.5 / meta.fps or moved is None else
               f"[refused; one frame per row, drifting {moved['drift_s']:+.6f} s by the episode's end: "
               "--frame-pairing row serves each row its own frame]")
    return (f"timestamps (episode {episode.index}): {kind}; largest gap to a camera frame {gap:.6f} s: {verdict} "
            "(`dl validate` checks every episode)")
