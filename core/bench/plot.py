"""`dl report --plot`: pictures of a comparison, drawn with matplotlib (the optional extra `dl[plot]`),
without a display (the Agg backend)."""

from pathlib import Path

from ..contracts.errors import DlError
from ..contracts.extras import require
from .report import ReportRow
from .timeline import rates as timeline_rates


def _pyplot():
    matplotlib = require("matplotlib", "plot", "dl report --plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_comparison(rows: list[ReportRow], path: Path) -> Path:
    """Two bar charts side by side, one bar per run: samples/s and peak RSS (GB, process tree; summed over
    ranks for multi-rank runs). Failed runs are left out. Returns `path` (a PNG)."""
    plt = _pyplot()
    ok = [r for r in rows if r.result.get("status") == "ok"]
    if not ok:
        raise DlError("no successful run to plot.")
    labels = [r.label for r in ok]
    fig, axes = plt.subplots(1, 2, figsize=(12, 1.2 + 0.45 * len(ok)), sharey=True, constrained_layout=True)
    for ax, key, title in ((axes[0], "samples_per_s", "samples/s (steady window)"),
                           (axes[1], "peak_rss_gb", "peak RSS GB (process tree)")):
        values = [r.result.get(key) or 0 for r in ok]
        bars = ax.barh(labels, values, color=[f"C{i % 10}" for i in range(len(ok))])
        ax.bar_label(bars, labels=[f"{v:,.0f}" if v >= 100 else f"{v:.3g}" for v in values], padding=3)
        ax.set_title(title)
        ax.margins(x=0.15)
    axes[0].invert_yaxis()  # the first run on top (the axes share y: invert once)
    fig.suptitle("dl report: runs compared")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_throughput(rows: list[ReportRow], path: Path) -> Path:
    """Each run's samples/s over time, per `throughput_timeline` bin from the DataLoader's first `iter()`
    (warm-up included: start-up, stalls and epoch rollovers show); a dot marks where the steady window
    began. Runs without a timeline (results from before it was recorded) are left out. Returns `path`."""
    plt = _pyplot()
    timed = [r for r in rows if r.result.get("status") == "ok" and r.result.get("throughput_timeline")]
    if not timed:
        raise DlError("none of these results records throughput over time (throughput_timeline); rerun them "
                      "with this dl.")
    fig, ax = plt.subplots(figsize=(12, 5), constrained_layout=True)
    for i, row in enumerate(timed):
        timeline = row.result["throughput_timeline"]
        width = timeline["bin_s"]
        rates = timeline_rates(timeline)
        times = [(k + 0.5) * width for k in range(len(rates))]
        ax.plot(times, rates, marker=".", color=f"C{i % 10}", label=row.label)
        start = timeline.get("window_start_s")
        if start is not None and rates:
            k = min(int(start // width), len(rates) - 1)
            ax.plot([times[k]], [rates[k]], "o", color=f"C{i % 10}", markersize=9, markerfacecolor="none")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds since the DataLoader's first iter()")
    ax.set_ylabel(f"samples/s (per {timed[0].result['throughput_timeline']['bin_s']:g} s bin)")
    ax.set_title("throughput over time (circle: steady window starts)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
