"""Rich rendering of benchmark results: one row per metric, one column per run (fits narrow terminals)."""

from rich.console import Console
from rich.table import Table

ROWS = (
    ("samples_per_s", "samples/s"), ("decoded_frames_per_s", "decoded frames/s"),
    ("single_proc_samples_per_s", "single-process samples/s"), ("fetch_pct", "fetch % (single-process)"),
    ("decode_pct", "decode % (single-process)"), ("shuffle_randomness_frac", "shuffle randomness"),
    ("first_batch_latency_s", "first batch latency s"), ("p50_sample_latency_ms", "p50 sample latency ms"),
    ("p95_sample_latency_ms", "p95 sample latency ms"), ("p99_sample_latency_ms", "p99 sample latency ms"),
    ("peak_rss_gb", "peak RSS GB (tree)"), ("pss_gb_at_window_end", "PSS GB (tree, window end)"),
    ("video_decoder_cache", "decoder cache hit/miss/evict"), ("window_samples", "samples in window"),
    ("resume_first_batch_s", "resume first batch s"),
    ("total_time_s", "total time s"),
)


def _cell(result: dict, key: str) -> str:
    value = result.get(key)
    if key == "video_decoder_cache" and isinstance(value, dict):
        return f"{value['hits']}/{value['misses']}/{value['evictions']}"
    if key == "shuffle_randomness_frac" and value is not None and result.get("shuffle_randomness_ideal"):
        return f"{value:.3f} (ideal {result['shuffle_randomness_ideal']:.3f})"
    return "-" if value is None else str(value)


def render_results(results: list[dict], console: Console) -> None:
    """The metrics table of the successful runs; failed runs are listed under it with their error."""
    ok = [r for r in results if r.get("status") == "ok"]
    if ok:
        table = Table(title="dl run results", header_style="bold")
        table.add_column("metric")
        for result in ok:
            table.add_column(result["name"], justify="right")
        for key, label in ROWS:
            if any(r.get(key) is not None for r in ok):  # rows no run reports (resume, for map) are left out
                table.add_row(label, *(_cell(r, key) for r in ok))
        for group, prefix in (("loader_stats", ""), ("resume_loader_stats", "resume: "), ("source_stats", "source: ")):
            for key in sorted({k for r in ok for k in r.get(group, {})}):
                table.add_row(f"{prefix}{key}", *(str(r.get(group, {}).get(key, "-")) for r in ok))
        console.print(table)
    for result in results:
        if result.get("status") != "ok":
            console.print(f"[bold red]{result.get('name')} failed:[/] {result.get('error')}", highlight=False)
