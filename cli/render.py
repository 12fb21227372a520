"""Rich rendering of benchmark results: what was measured (dataset, runs) above one table with a row per
metric and a column per run, in words a newcomer can read; every field is explained in docs/benchmark.md."""

from rich.console import Console
from rich.table import Table

ROWS = (
    ("samples_per_s", "samples/s (spread)"),
    ("decoded_frames_per_s", "video frames/s"),
    ("decoded_frames_pct_of_random_ceiling", "% of max decode rate, random frames"),
    ("decoded_frames_pct_of_sequential_ceiling", "% of max decode rate, frames in order"),
    ("single_proc_samples_per_s", "samples/s with 0 workers (spread)"),
    ("fetch_pct", "  time reading rows, converting %"),
    ("decode_pct", "  time decoding video %"),
    ("shuffle_randomness_frac", "episodes per batch (ideal)"),
    ("init_s", "dataset built in, s"),
    ("first_batch_latency_s", "first batch after, s"),
    ("p50_sample_latency_ms", "ms per sample, median"),
    ("p95_sample_latency_ms", "ms per sample, 95th pct"),
    ("p99_sample_latency_ms", "ms per sample, 99th pct"),
    ("peak_rss_gb", "peak memory GB (all procs)"),
    ("pss_gb_at_window_end", "memory GB, shared once"),
    ("video_decoder_cache", "video decoders reused/opened"),
    ("window_samples", "samples measured"),
    ("resume_first_batch_s", "first batch after resume, s"),
    ("total_time_s", "run time s"),
)
"""(result field, row label); the first line of each label is what docs/benchmark.md explains."""
SPREADS = {"samples_per_s": "samples_per_s_spread_pct", "single_proc_samples_per_s": "single_proc_spread_pct"}
"""The rates shown with the spread of their blocks (`dl.bench.steady.spread_pct`)."""


def _cell(result: dict, key: str) -> str:
    value = result.get(key)
    ceiling = result.get("decode_ceiling") or {}
    if key.startswith("decoded_frames_pct_of_") and value is not None:
        kind = key.removeprefix("decoded_frames_pct_of_").removesuffix("_ceiling")
        text = f"{value}% of {ceiling.get(f'{kind}_frames_per_s')}"
        spread = ceiling.get(f"{kind}_spread_pct")
        if kind in result.get("decode_ceiling_exceeded", ()):
            return f"{text}: limit measured low"
        if value > 100:
            return f"{text} (decodes in order)"
        return f"{text} ({spread}%)" if spread is not None else text
    if key in SPREADS and value is not None and result.get(SPREADS[key]) is not None:
        return f"{value} ({result[SPREADS[key]]}%)"
    if key == "video_decoder_cache" and isinstance(value, dict):
        return f"{value['hits']}/{value['misses']}"
    if key == "shuffle_randomness_frac" and value is not None and result.get("shuffle_randomness_ideal"):
        return f"{value:.3f} ({result['shuffle_randomness_ideal']:.3f})"
    return "-" if value is None else str(value)


def describe_run(result: dict) -> str:
    """What a run name stands for: loader, decoder, mode, workers, ranks."""
    config = result.get("config") or {}
    ranks = result.get("world_size") or config.get("world_size") or 1
    parts = [f"loader {config.get('loader')}", f"decoder {config.get('decoder')}", f"mode {config.get('mode')}",
             f"{config.get('num_workers')} DataLoader worker(s)", f"batch {config.get('batch_size')}"]
    if ranks > 1:
        parts.append(f"{ranks} ranks" if "rank" not in result else f"rank {result['rank']} of {ranks}")
    return ", ".join(parts)


def describe_calibration(result: dict) -> str:
    """How `--decoder auto` chose: each decoder's measured frames/s (or why it cannot run here)."""
    calibration = result["decoder_calibration"]
    by = calibration["by"].removesuffix("_frames_per_s")
    parts = [f"{name} {r[calibration['by']]}" if "unavailable" not in r else f"{name} unavailable ({r['unavailable']})"
             for name, r in calibration["decoders"].items()]
    return f"[bold]--decoder auto[/] chose {calibration['chosen']} by {by} frames/s per process: {'; '.join(parts)}"


def codec_fixes(calibration: dict) -> list[str]:
    """One line per decoder that runs here but cannot decode the dataset's codec (`--decoder auto`): what, the
    decoder used instead, and the `dl transcode` command that would let it decode the dataset."""
    return [f"{name} {r['unavailable']}: decoding with {calibration['chosen']} instead. To decode with {name}, "
            f"re-encode the dataset: {r['fix']}" for name, r in calibration["decoders"].items() if r.get("fix")]


def describe_dataset(result: dict, default_dataset: bool) -> str:
    """The dataset a result measured: its root (or "dl's generated default dataset: ..."), episodes, frames,
    fps, cameras."""
    data = result.get("dataset") or {}
    cameras = data.get("cameras") or []
    what = f"{data.get('episodes')} episodes, {data.get('frames')} frames at {data.get('fps')} fps, " + (
        f"{len(cameras)} camera(s) ({', '.join(cameras)})" if cameras else "no cameras")
    if default_dataset:
        from dl.bench.default_dataset import DEFAULT_CONFIG as c

        return (f"dl's generated default dataset ({c.episodes} episodes, {c.cameras} cameras, {c.width}x{c.height} "
                f"{c.codec.upper()}) at {data.get('root')}: {what}")
    return f"{data.get('root')}: {what}"


def render_results(results: list[dict], console: Console, default_dataset: bool = False) -> None:
    """The dataset and what each run is, then the metrics table of the successful runs (one column per run:
    its name when it is the only one, else #1, #2... named above), then failed runs with their cause."""
    ok = [r for r in results if r.get("status") == "ok"]
    if ok:
        console.print(f"[bold]dataset[/] {describe_dataset(ok[0], default_dataset)}", highlight=False,
                      soft_wrap=True)
        labels = [r["name"] for r in ok] if len(ok) == 1 else [f"#{i}" for i in range(1, len(ok) + 1)]
        for label, result in zip(labels, ok, strict=True):
            head = f"[bold]{result['name']}[/]" if len(ok) == 1 else f"[bold]{label}[/] {result['name']}"
            console.print(f"{head}: {describe_run(result)}", highlight=False, soft_wrap=True)
        for line in dict.fromkeys(describe_calibration(r) for r in ok if r.get("decoder_calibration")):
            console.print(line, highlight=False, soft_wrap=True)
        for line in dict.fromkeys(f for r in ok if r.get("decoder_calibration") for f in
                                  codec_fixes(r["decoder_calibration"])):
            console.print(line, highlight=False, soft_wrap=True, markup=False)
        table = Table(title="dl run results", header_style="bold", caption="fields: docs/benchmark.md")
        table.add_column("metric", no_wrap=True)
        for label in labels:
            table.add_column(label, justify="right", overflow="fold")
        for key, label in ROWS:
            if any(r.get(key) is not None for r in ok):  # rows no run reports (resume, for map) are left out
                table.add_row(label, *(_cell(r, key) for r in ok))
        for group, prefix in (("loader_stats", ""), ("resume_loader_stats", "resume: "), ("source_stats", "source: ")):
            for key in sorted({k for r in ok for k in r.get(group, {})}):
                table.add_row(f"{prefix}{key}", *(str(r.get(group, {}).get(key, "-")) for r in ok))
        console.print(table)
        for label, result in zip(labels, ok, strict=True):
            if result.get("decode_ceiling_warning"):
                console.print(f"[bold yellow]{label}[/]: {result['decode_ceiling_warning']}", highlight=False,
                              soft_wrap=True)
    for result in results:
        if result.get("status") != "ok":
            console.print(f"[bold red]{result.get('name')} failed:[/] {result.get('error')}", highlight=False,
                          soft_wrap=True)
