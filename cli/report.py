"""`dl report DIR...`: one comparison of many benchmark results (`dl.bench.report`), as a rich table and
`summary.csv`, and with `--plot` as pictures (`dl.bench.plot`)."""

import csv
import json
from pathlib import Path

import click
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from dl.contracts.errors import format_indices

from .console import make_console

HEADERS = {"samples_per_s": "samples/s", "decoded_frames_per_s": "frames/s", "peak_rss_gb": "peak RSS GB",
           "shuffle_randomness_frac": "shuffle", "first_batch_latency_s": "1st batch s",
           "p95_sample_latency_ms": "p95 ms", "samples_per_s_ratio": "samples/s ratio",
           "peak_rss_gb_ratio": "RSS ratio", "episodes_per_rank": "episodes/epoch per rank",
           "shared_episodes": "shared episodes", "root": "dataset"}
"""Short table headers (summary.csv keeps the field names)."""
RANK_COLUMNS = ("episodes_per_rank", "shared_episodes")
"""Figures of multi-rank runs that `summary_rows` adds beside the metrics."""


def _header(name: str) -> str:
    return HEADERS.get(name, name.replace("loader_options.", "").replace("resources.", ""))


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _cell(header: str, value, datasets: dict[str, str]) -> str:
    """A table cell: an episode selection as ranges ("0, 3-6, 8", "all"), a dataset by its name, numbers to 4
    significant digits."""
    if header == "episodes":
        ranges = format_indices(json.loads(value) if isinstance(value, str) else value) if value else "all"
        return ranges.replace(",", ", ")  # wraps between ranges, never inside one
    if header == "root":
        return datasets.get(str(value), str(value))
    return _fmt(value)


def _is_figure(header: str) -> bool:
    """Whether a summary column is a figure (a metric, a ratio, a rank count), not a run's configuration."""
    from dl.bench.report import METRICS

    return header in METRICS or header.endswith("_ratio") or header in RANK_COLUMNS


def _table(title: str | None, lines: list[dict], headers: list[str], datasets: dict[str, str]) -> Table:
    table = Table(title=title, header_style="bold")
    for header in headers:
        table.add_column(_header(header), justify="right" if _is_figure(header) else "left", overflow="fold")
    previous = None
    for line in lines:
        if previous is not None and line["scenario"] != previous:
            table.add_section()
        previous = line["scenario"]
        table.add_row(*(_cell(h, line.get(h), datasets) for h in headers),
                      style="red" if line["status"] != "ok" else None)
    return table


def _fit(title: str, lines: list[dict], headers: list[str], datasets: dict[str, str], console: Console) -> list:
    """One table when it fits the console's width; else the runs' configuration and their figures as two tables
    (each run named in both, or numbered `#N` in the second when its names leave the figures no room)."""
    def fits(table: Table) -> bool:  # its natural width, unwrapped, within the console's
        return Measurement.get(console, console.options.update_width(10_000), table).maximum <= console.width

    one = _table(title, lines, headers, datasets)
    if fits(one):
        return [one]
    figures = [h for h in headers if _is_figure(h)]
    config = [h for h in headers if h not in figures]
    tables = [_table(f"{title}: configuration", lines, config, datasets),
              _table("figures", lines, ["run", *figures], datasets)]
    if not fits(tables[1]):
        numbered = [{"#": f"#{i}", **line} for i, line in enumerate(lines, 1)]
        tables = [_table(f"{title}: configuration", numbered, ["#", *config], datasets),
                  _table("figures", numbered, ["#", *figures], datasets)]
    return tables


@click.command(epilog="\b\nExamples:\n  dl report dl-results                     # one folder\n"
               "  dl report local-runs slurm-runs --baseline local-runs/mmap_local-cpu-single-w2\n"
               "  dl report r --filter loader=pool --sort samples_per_s --reverse --plot")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--sort", metavar="KEY", help="Sort each scenario's runs by a metric or config field "
              "(e.g. samples_per_s, num_workers).")
@click.option("--reverse", is_flag=True, help="Sort in descending order.")
@click.option("--filter", "filters", multiple=True, metavar="KEY=VALUE", help="Keep runs whose config (or result) "
              "field reads VALUE, e.g. loader=pool or status=ok (repeatable: all must hold).")
@click.option("--baseline", metavar="RUN", help="Add ratios of samples/s and peak RSS against this run (its name, "
              "or FOLDER/NAME when several folders are given).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Where summary.csv (and the plots) go "
              "[the first folder given].")
@click.option("--plot", is_flag=True, help="Also draw comparison.png (samples/s and peak RSS per run) and "
              "throughput.png (each run's samples/s over time); needs matplotlib, the plot extra (without it, the "
              "error says how to install it for this dl).")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison (one object per run, as summary.csv) and "
              "the repeats' medians and ranges as JSON on stdout, for scripts (the tables go to stderr).")
def report(paths, sort, reverse, filters, baseline, out_dir, plot, as_json):
    """Compare benchmark results: every result JSON in PATHS (folders written by `dl run`, with any
    scheduler, or single files), multi-rank runs as their merged line, grouped by scenario, with the
    configuration columns that differ. Writes summary.csv; mixture runs (`dl run --mix`) also get a table of each
    member's share of samples next to its weight, and multi-rank runs a per-rank table (node, episodes admitted and
    seen, episodes shared between ranks). Runs of `dl run --repeats` also get each configuration's median and range,
    and a line for every two configurations whose ranges overlap (no difference shown)."""
    from dl.bench.repeats import summarize
    from dl.bench.report import (
        dataset_names,
        differing,
        load_rows,
        mixture_rows,
        order,
        rank_rows,
        ratios,
        select,
        summary_rows,
    )

    from .render import render_repeats

    console = make_console(stderr=as_json)
    rows = order(select(load_rows([Path(p) for p in paths]), list(filters)), sort, reverse)
    if not rows:
        console.print("no run matches the filters", highlight=False)
        return
    columns = differing(rows)
    ratio = ratios(rows, baseline) if baseline else None
    lines = summary_rows(rows, columns, ratio)
    headers = list(dict.fromkeys(k for line in lines for k in line))
    repeated = summarize([r.result for r in rows]) if any((r.result.get("config") or {}).get("repeat_of")
                                                          for r in rows) else None
    datasets = dataset_names(rows)
    if "root" in columns:
        for root, name in datasets.items():
            if name != root:
                console.print(f"dataset {name}: {root}", highlight=False, markup=False)
    shown = [h for h in headers if not (h in ("scenario", "status") and len({line[h] for line in lines}) == 1)]
    shown.sort(key=lambda h: ("run", "root", "episodes").index(h) if h in ("run", "root", "episodes") else 3)
    for table in _fit(f"dl report: {len(rows)} run(s)", lines, shown, datasets, console):
        console.print(table)
    if repeated:
        render_repeats(repeated, console)
    members = mixture_rows(rows)
    if members:
        mixed = Table(title="members of mixture runs: share of samples against weight", header_style="bold")
        for header in members[0]:
            mixed.add_column(header.replace("_", " "), justify="left" if header in ("run", "member") else "right",
                             overflow="fold")
        for line in members:
            mixed.add_row(*(_fmt(v) for v in line.values()))
        console.print(mixed)
    per_rank = rank_rows(rows)
    if per_rank:
        ranks = Table(title="ranks of multi-rank runs", header_style="bold")
        for header in per_rank[0]:
            ranks.add_column(header.replace("_", " "))
        for line in per_rank:
            ranks.add_row(*(_fmt(v) for v in line.values()))
        console.print(ranks)
    target = Path(out_dir or (paths[0] if Path(paths[0]).is_dir() else Path(paths[0]).parent))
    target.mkdir(parents=True, exist_ok=True)
    with open(target / "summary.csv", "w", newline="") as f:  # every column, values as recorded
        writer = csv.DictWriter(f, fieldnames=headers)
        writer.writeheader()
        writer.writerows(lines)
    console.print(f"summary: {target / 'summary.csv'}", highlight=False, markup=False)
    if plot:
        from dl.bench.plot import plot_comparison, plot_throughput

        for made in (plot_comparison(rows, target / "comparison.png"),
                     plot_throughput(rows, target / "throughput.png")):
            console.print(f"plot: {made}", highlight=False, markup=False)
    if as_json:  # the tables went to stderr
        click.echo(json.dumps({"runs": lines, **({"repeats": repeated} if repeated else {})}, default=str))
