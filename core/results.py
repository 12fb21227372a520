"""Writing benchmark results: one JSON per run, and a CSV with one row per run."""

import csv
import json
from pathlib import Path

HEADLINE = ("name", "status", "samples_per_s", "decoded_frames_per_s", "single_proc_samples_per_s", "fetch_pct",
            "decode_pct", "shuffle_randomness_frac", "shuffle_randomness_ideal", "first_batch_latency_s",
            "p50_sample_latency_ms", "p95_sample_latency_ms", "p99_sample_latency_ms", "peak_rss_gb",
            "pss_gb_at_window_end", "total_time_s")
"""The fields shown first, in LeRobot's streaming-benchmark names."""


def flatten(result: dict, prefix: str = "") -> dict:
    """Nested dicts become dotted keys (`video_decoder_cache.hits`); lists become JSON strings."""
    out = {}
    for key, value in result.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, list):
            out[name] = json.dumps(value)
        else:
            out[name] = value
    return out


def write_csv(results: list[dict], path: Path) -> None:
    """One row per result: the HEADLINE fields first, then every other flattened field, sorted."""
    rows = [flatten(r) for r in results]
    rest = sorted({k for row in rows for k in row} - set(HEADLINE))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*HEADLINE, *rest])
        writer.writeheader()
        writer.writerows(rows)


def read_results(paths: list[Path]) -> list[dict]:
    """Load result JSON files (a run that died without writing one becomes a failed entry)."""
    out = []
    for path in paths:
        try:
            out.append(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as exc:
            out.append({"name": Path(path).stem, "status": "failed", "error": f"no result: {exc}"})
    return out
