"""`dl report --plot`: pictures of a comparison, drawn with matplotlib (dl's optional extra `plot`),
without a display (the Agg backend)."""

import json
import statistics
from pathlib import Path

from ..contracts.errors import DlError
from ..contracts.extras import require
from .report import ReportRow, dataset_names, differing
from .timeline import rates as timeline_rates


def _pyplot():
    matplotlib = require("matplotlib", "plot", "dl report --plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def run_labels(rows: list[ReportRow]) -> list[str]:
    """What each run measured, to name its bar or line: the dataset (`dl.bench.report.dataset_names`) and the run,
    then the other configuration fields that differ between the runs (episode selections as ranges)."""
    from ..contracts.errors import format_indices

    shown = [k for k in differing(rows) if k not in ("root", "name") and not k.startswith("decoder_calibration")]
    datasets = dataset_names(rows)
    labels = []
    for row in rows:
        parts = []
        for key in shown:
            value = row.config.get(key)
            if key == "episodes":
                value = format_indices(json.loads(value) if isinstance(value, str) else value) if value else "all"
            parts.append(f"{key.removeprefix('loader_options.')} {value}")
        labels.append(f"{datasets[row.dataset_root]}: {row.label}" + (f"\n{', '.join(parts)}" if parts else ""))
    return labels


def plot_comparison(rows: list[ReportRow], path: Path) -> Path:
    """Two bar charts side by side, one bar per run: samples/s and peak RSS (GB, process tree; summed over
    ranks for multi-rank runs). Failed runs are left out. Returns `path` (a PNG)."""
    plt = _pyplot()
    ok = [r for r in rows if r.result.get("status") == "ok"]
    if not ok:
        raise DlError("no successful run to plot.")
    labels = run_labels(ok)
    fig, axes = plt.subplots(1, 2, figsize=(13, 1.4 + 0.6 * len(ok)), sharey=True, constrained_layout=True)
    for ax, key, title in ((axes[0], "samples_per_s", "samples/s (steady window)"),
                           (axes[1], "peak_rss_gb", "peak RSS GB (process tree)")):
        values = [r.result.get(key) or 0 for r in ok]
        bars = ax.barh(labels, values, color=[f"C{i % 10}" for i in range(len(ok))])
        ax.bar_label(bars, labels=[f"{v:,.0f}" if v >= 100 else f"{v:.3g}" for v in values], padding=3)
        ax.set_title(title)
        ax.margins(x=0.15)
    axes[0].invert_yaxis()  # the first run on top (the axes share y: invert once)
    fig.suptitle("dl report: runs compared (dataset: run, and the settings that differ)")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


SEPARATE_ABOVE = 10.0
"""Runs whose median rates differ by more than this factor get a panel each (one axis would flatten the slow ones)."""


def throughput_panels(timed: list[ReportRow]) -> int:
    """1 (one axis) or a panel per run, when the median rates of the runs' timelines differ by more than
    `SEPARATE_ABOVE` times (or one's is 0)."""
    medians = [statistics.median(timeline_rates(r.result["throughput_timeline"]) or [0]) for r in timed]
    apart = min(medians) <= 0 or max(medians) / min(medians) > SEPARATE_ABOVE
    return len(timed) if apart and len(timed) > 1 else 1


def plot_throughput(rows: list[ReportRow], path: Path) -> Path:
    """`throughput_figure(rows)` saved to `path`. Returns `path`."""
    plt = _pyplot()
    fig = throughput_figure(rows)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def throughput_figure(rows: list[ReportRow]):
    """Each run's samples/s over time, per `throughput_timeline` bin from the DataLoader's first `iter()`
    (warm-up included: start-up, stalls and epoch rollovers show); a circle marks where the steady window
    began. On one axis, or a panel per run (each its own scale from 0) when the runs' median rates differ by more
    than `SEPARATE_ABOVE` times; every axis spans 0 to the highest rate it shows. Runs without a timeline (results from
    before it was recorded) are left out. Returns the matplotlib figure.

    Raises:
        DlError: no result has a timeline.
    """
    plt = _pyplot()
    timed = [r for r in rows if r.result.get("status") == "ok" and r.result.get("throughput_timeline")]
    if not timed:
        raise DlError("none of these results records throughput over time (throughput_timeline); rerun them "
                      "with this dl.")
    labels, panels = run_labels(timed), throughput_panels(timed)
    fig, axes = plt.subplots(panels, 1, figsize=(12, 5 if panels == 1 else 1.2 + 2.2 * panels), sharex=True,
                             squeeze=False, constrained_layout=True)
    for i, row in enumerate(timed):
        ax = axes[i if panels > 1 else 0][0]
        timeline = row.result["throughput_timeline"]
        width = timeline["bin_s"]
        rates = timeline_rates(timeline)
        times = [(k + 0.5) * width for k in range(len(rates))]
        ax.plot(times, rates, marker=".", color=f"C{i % 10}", label=labels[i])
        start = timeline.get("window_start_s")
        if start is not None and rates:
            k = min(int(start // width), len(rates) - 1)
            ax.plot([times[k]], [rates[k]], "o", color=f"C{i % 10}", markersize=9, markerfacecolor="none")
        ax.grid(alpha=0.3)
        if panels > 1:
            ax.set_title(labels[i].replace("\n", "; "), fontsize="small", loc="left")
            ax.set_ylabel("samples/s")
    for (ax,) in axes:  # after every line is drawn: a limit set earlier would keep the first run's range
        ax.set_ylim(bottom=0)
    axes[-1][0].set_xlabel("seconds since the DataLoader's first iter()")
    bin_s = timed[0].result["throughput_timeline"]["bin_s"]
    if panels == 1:
        axes[0][0].set_ylabel(f"samples/s (per {bin_s:g} s bin)")
        axes[0][0].legend(fontsize="small", loc="best")
    apart_note = f": a panel each, their rates differ over {SEPARATE_ABOVE:g}x" if panels > 1 else ""
    fig.suptitle(f"throughput over time, samples/s per {bin_s:g} s bin (circle: steady window starts){apart_note}")
    return fig
