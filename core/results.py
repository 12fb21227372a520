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


SUMMED = ("samples_per_s", "decoded_frames_per_s", "single_proc_samples_per_s", "peak_rss_gb", "pss_gb_at_window_end",
          "window_samples", "window_batches")
WORST = ("first_batch_latency_s", "p50_sample_latency_ms", "p95_sample_latency_ms", "p99_sample_latency_ms",
         "total_time_s", "resume_first_batch_s", "resume_fast_forward_s")
MEAN = ("fetch_pct", "decode_pct", "shuffle_randomness_frac", "shuffle_randomness_ideal")


LOADER_STAT_MERGE = {"episodes_admitted": sum, "pool_bytes_peak": sum, "resume_fast_forward_s": max,
                     "shuffle_randomness_consumer_ideal": lambda v: round(sum(v) / len(v), 4)}
"""How loader stats combine over ranks; any other stat is kept when every rank reports the same value."""


def _merge_stat(key: str, values: list):
    if key in LOADER_STAT_MERGE and all(isinstance(v, int | float) for v in values):
        return LOADER_STAT_MERGE[key](values)
    return values[0] if all(v == values[0] for v in values) else None


def merge_ranks(name: str, ranks: list[dict]) -> dict:
    """One line for a multi-rank run: throughput, memory and counts summed over ranks (separate process
    trees), latencies and times the worst rank's, percentages and shuffle fractions averaged. Failed if any
    rank failed. `ranks` keeps every rank's own result."""
    failed = [r for r in ranks if r.get("status") != "ok"]
    if failed:
        return {"name": name, "status": "failed", "ranks": ranks,
                "error": "; ".join(f"{r.get('name')}: {r.get('error')}" for r in failed)}
    merged = {"name": name, "status": "ok", "world_size": len(ranks)}
    merged.update({k: round(sum(r[k] for r in ranks), 3) for k in SUMMED if all(r.get(k) is not None for r in ranks)})
    merged.update({k: max(r[k] for r in ranks) for k in WORST if all(r.get(k) is not None for r in ranks)})
    merged.update({k: round(sum(r[k] for r in ranks) / len(ranks), 4) for k in MEAN
                   if all(r.get(k) is not None for r in ranks)})
    caches = [r["video_decoder_cache"] for r in ranks]
    merged["video_decoder_cache"] = {k: sum(c[k] for c in caches) for k in ("hits", "misses", "evictions", "open")}
    stats = [r.get("loader_stats", {}) for r in ranks]
    merged["loader_stats"] = {k: _merge_stat(k, [s.get(k) for s in stats]) for k in stats[0]}
    merged["config"], merged["dataset"] = ranks[0].get("config"), ranks[0].get("dataset")
    merged["ranks"] = ranks
    return merged
