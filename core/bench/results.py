"""Benchmark result files: one JSON per run, a CSV with one row per run, and the merge of a multi-rank
run's per-rank results into one line (the host does it, whatever scheduler ran the ranks)."""

import csv
import json
from pathlib import Path

from .ceiling import ceiling_shares
from .timeline import rank_overlap, sum_timelines

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


SAME_RUN_IGNORES = ("name", "out_dir", "metadata_snapshot", "decoder_calibration")
"""Config fields that do not make two runs different runs (where they write, what they measured on the way)."""


def keep_earlier_results(specs: list, out_dir: Path) -> list[str]:
    """Name each spec (`dl.bench.spec.RunSpec`) so that its result replaces no other run's in `out_dir`: a
    result file of the same name that holds the same run (dataset and settings alike, `SAME_RUN_IGNORES` aside), or
    records no settings (a run that ended without a result), is replaced; one that holds another run (another
    dataset, other settings) is kept, and the spec is numbered (`NAME-2`, `NAME-3`...). Renames the specs in place;
    returns one line per spec that replaces or keeps a result, for the terminal."""
    lines, taken = [], set()
    for spec in specs:
        base, number, kept = spec.name, 1, []
        mine = {k: v for k, v in spec.public_dict().items() if k not in SAME_RUN_IGNORES}
        while True:
            name = base if number == 1 else f"{base}-{number}"
            earlier = _earlier_config(Path(out_dir), name)
            if name not in taken and (earlier is None or not earlier or earlier == mine):
                break
            if earlier:
                differ = sorted(k for k in set(earlier) | set(mine) if earlier.get(k) != mine.get(k))
                kept.append(f"{name}.json (another {', '.join(differ)})")
            number += 1
        if kept:
            lines.append(f"{name}: kept the earlier result(s) {'; '.join(kept)} in {out_dir}, this run writes "
                         f"{name}.json")
        if earlier is not None:
            lines.append(f"{name}: replacing the earlier {name}.json in {out_dir} (" + (
                "the same run: same dataset and settings)" if earlier else "a run that recorded no settings)"))
        spec.name = name
        taken.add(name)
    return lines


def _earlier_config(out_dir: Path, name: str) -> dict | None:
    """The config of the result `name` (or its rank 0's) in `out_dir`, without `SAME_RUN_IGNORES`; None where
    there is none; {} for a result without a config (one the host wrote for a run that ended without one)."""
    for path in (out_dir / f"{name}.json", out_dir / f"{name}-rank0.json"):
        if path.is_file():
            result = read_results([path])[0]
            return {k: v for k, v in (result.get("config") or {}).items() if k not in SAME_RUN_IGNORES}
    return None


def write_folder_csv(folder: Path) -> int:
    """Write `folder/results.csv` with one row per result JSON in `folder` (not its subfolders), sorted by
    name, so the CSV always covers exactly what the folder holds; returns the number of rows."""
    results = [r for r in read_results(sorted(Path(folder).glob("*.json"))) if r.get("status") in ("ok", "failed")]
    write_csv(results, Path(folder) / "results.csv")
    return len(results)


def read_results(paths: list[Path]) -> list[dict]:
    """Load result JSON files; one that is missing or unreadable becomes `{"name", "status": "failed",
    "error": "no result: ..."}`."""
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
         "total_time_s", "resume_first_batch_s", "samples_per_s_spread_pct", "single_proc_spread_pct", "init_s",
         "metadata_s", "build_s")
MEAN = ("fetch_pct", "decode_pct", "shuffle_randomness_frac", "shuffle_randomness_ideal")

STAT_MERGES = {"sum": sum, "max": max, "min": min, "mean": lambda v: round(sum(v) / len(v), 4)}
"""The rules a loader may declare for its stats (`ReportsStats.stats_merge`); "same" keeps a value every
rank reports identically."""


def merge_stats(stats: list[dict], rules: dict[str, str]) -> dict:
    """Combine one loader-stats dict per rank by the loader's own rules; a stat without a rule, with rule
    "same", or with values that are not all numbers, is kept only when every rank reports the same value
    (else None)."""
    out = {}
    for key in stats[0]:
        values = [s.get(key) for s in stats]
        rule = STAT_MERGES.get(rules.get(key, "same"))
        if rule is not None and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            out[key] = rule(values)
        else:
            out[key] = values[0] if all(v == values[0] for v in values) else None
    return out


def merge_ranks(name: str, ranks: list[dict]) -> dict:
    """One line for a multi-rank run: throughput, memory and counts summed over ranks (separate process
    trees), latencies and times the worst rank's, percentages and shuffle fractions averaged, loader stats
    by the rules the loader declared (`loader_stats_merge`), source stats by the source's
(`source_stats_merge`). Failed if any rank failed. `ranks` keeps every
    rank's own result."""
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
    rules = ranks[0].get("loader_stats_merge", {})
    for key in ("loader_stats", "resume_loader_stats"):
        if all(key in r for r in ranks):
            merged[key] = merge_stats([r[key] for r in ranks], rules)
    if rules:
        merged["loader_stats_merge"] = rules
    ceilings = [r.get("decode_ceiling") for r in ranks]
    if all(ceilings) and "decoded_frames_per_s" in merged:
        merged["decode_ceiling"] = merge_ceilings(ceilings)
        in_order = bool((merged.get("loader_stats") or {}).get("decode_open_chunks"))
        merged.update(ceiling_shares(merged["decoded_frames_per_s"], merged["decode_ceiling"], in_order))
    if all("throughput_timeline" in r for r in ranks):
        merged["throughput_timeline"] = sum_timelines([r["throughput_timeline"] for r in ranks])
    overlap = rank_overlap(ranks)
    if overlap:
        merged["rank_disjointness"] = overlap
    if all("source_stats" in r for r in ranks):
        merged["source_stats"] = merge_stats([r["source_stats"] for r in ranks], ranks[0]["source_stats_merge"])
        merged["source_stats_merge"] = ranks[0]["source_stats_merge"]
    for key in ("config", "dataset", "dataloader", "environment"):
        if key in ranks[0]:
            merged[key] = ranks[0][key]
    merged["ranks"] = ranks
    return merged


def merge_ceilings(ceilings: list[dict]) -> dict:
    """The decode ceiling of a multi-rank run (the ranks measured theirs at once): processes and totals summed over
    ranks, per-process rates averaged, spreads the widest rank's."""
    out = {"decoder": ceilings[0]["decoder"], "seconds": ceilings[0]["seconds"],
           "processes": sum(c["processes"] for c in ceilings)}
    for kind in ("random", "sequential"):
        out[f"{kind}_frames_per_s_per_process"] = round(
            sum(c[f"{kind}_frames_per_s_per_process"] for c in ceilings) / len(ceilings), 1)
        out[f"{kind}_frames_per_s"] = round(sum(c[f"{kind}_frames_per_s"] for c in ceilings), 1)
        spreads = [c.get(f"{kind}_spread_pct") for c in ceilings]
        if all(v is not None for v in spreads):
            out[f"{kind}_spread_pct"] = max(spreads)
    return out
