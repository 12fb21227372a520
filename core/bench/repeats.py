"""`dl run --repeats N`: each configuration run N times, interleaved (A B C, B C A, C A B, ...) so a noisy machine
affects each alike, every run a fresh process; and the repeats of each configuration summarized as median and range,
with a word where two configurations' ranges overlap (no difference shown)."""

import dataclasses
import statistics

FIGURES = ("samples_per_s", "single_proc_samples_per_s", "first_batch_latency_s", "peak_rss_gb")
"""The figures the summary gives as median (range)."""


def interleaved(specs: list, repeats: int) -> list:
    """`repeats` copies of every spec (a `dl.bench.spec.RunSpec`), round `k` starting `k` configurations further on;
    copy `k` (1-based) is named `NAME-repK` and records `repeat_of` NAME. One repeat returns `specs` unchanged."""
    if repeats <= 1:
        return list(specs)
    out = []
    for k in range(repeats):
        shift = k % len(specs)
        for spec in specs[shift:] + specs[:shift]:
            out.append(dataclasses.replace(spec, name=f"{spec.name}-rep{k + 1}", repeat_of=spec.name))
    return out


def summarize(results: list[dict]) -> list[dict]:
    """Per configuration (`config.repeat_of`, else the run's name), in first-seen order: `{"run", "repeats",
    FIGURE: {"median", "min", "max"}}` over its successful runs, for each of `FIGURES` they report."""
    groups: dict[str, list[dict]] = {}
    for result in results:
        if result.get("status") == "ok":
            key = (result.get("config") or {}).get("repeat_of") or result.get("name")
            groups.setdefault(key, []).append(result)
    out = []
    for run, runs in groups.items():
        line = {"run": run, "repeats": len(runs)}
        for figure in FIGURES:
            values = [r[figure] for r in runs if isinstance(r.get(figure), int | float)]
            if values:
                line[figure] = {"median": round(statistics.median(values), 3), "min": min(values), "max": max(values)}
        out.append(line)
    return out


def overlapping(summary: list[dict], figure: str = "samples_per_s") -> list[str]:
    """One line per pair of configurations whose `figure` ranges overlap: their repeats show no difference."""
    lines = []
    ranged = [s for s in summary if figure in s and s["repeats"] > 1]
    for i, a in enumerate(ranged):
        for b in ranged[i + 1:]:
            x, y = a[figure], b[figure]
            if x["min"] <= y["max"] and y["min"] <= x["max"]:
                lines.append(f"{a['run']} and {b['run']}: {figure} ranges overlap ({x['min']:g}-{x['max']:g} and "
                             f"{y['min']:g}-{y['max']:g}): no difference shown by these repeats.")
    return lines
