"""Rich rendering of benchmark results: what was measured (dataset, runs) above one table with a row per
metric and a column per run, in words a newcomer can read; every field is explained in docs/benchmark.md."""

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .labels import (
    GROUPS,
    IN_ORDER_NOTE,
    INIT_PARTS,
    ROWS,
    SPREAD_NOTE,
    UNSTEADY_PCT,
    stat_cell,
    stat_label,
    stat_order,
    unsteady_notes,
)

MIN_LABEL_WIDTH = 16
"""The narrowest the labels' column gets (its labels wrap at spaces) when many runs share the width."""
SPREADS = {"samples_per_s": "samples_per_s_spread_pct", "single_proc_samples_per_s": "single_proc_spread_pct"}
"""The rates shown with the spread of their blocks (`dl.bench.steady.spread_pct`)."""
MEASURED_IN = {"samples_per_s": "steady window", "single_proc_samples_per_s": "single-process"}
"""The phase (`dl.bench.contention`, the result's `machine_load.phases`) each rate is measured in."""


def busy_in(result: dict, key: str) -> bool:
    """Whether other processes took more than their share of the machine while `key`'s rate was measured."""
    phases = (result.get("machine_load") or {}).get("phases") or {}
    return bool((phases.get(MEASURED_IN.get(key, "")) or {}).get("busy"))


def _cell(result: dict, key: str) -> str:
    value = result.get(key)
    ceiling = result.get("decode_ceiling") or {}
    batch = (result.get("config") or {}).get("batch_size")
    if key.startswith("decoded_frames_pct_of_") and value is not None:
        kind = key.removeprefix("decoded_frames_pct_of_").removesuffix("_ceiling")
        rate = ceiling.get(f"{kind}_frames_per_s")
        text = f"{value}% of {rate:,.0f} frames/s" if isinstance(rate, int | float) else f"{value}%"
        spread = ceiling.get(f"{kind}_spread_pct")
        if kind in result.get("decode_ceiling_exceeded", ()):
            return f"{text}: limit measured low"
        if value > 100:
            return f"{text}, in order"
        return f"{text} (trials varied {spread:g}%)" if spread is not None else text
    if key in SPREADS and value is not None and result.get(SPREADS[key]) is not None:
        spread = result[SPREADS[key]]
        return (f"{value} ({spread:g}%)" + (" unsteady" if spread > UNSTEADY_PCT else "")
                + (" busy" if busy_in(result, key) else ""))
    if key == "init_s" and value is not None and any(part in result for part in INIT_PARTS):
        return f"{value} (" + ", ".join(f"{name} {result[part]}" for part, name in INIT_PARTS.items()
                                        if part in result) + ")"
    if key == "video_decoder_cache" and isinstance(value, dict):
        return f"{value['hits']}/{value['misses']}"
    if key == "shuffle_randomness_frac" and value is not None and batch:
        ideal = result.get("shuffle_randomness_ideal")
        return f"{value * batch:.1f} of {batch}" + (f" (uniform {ideal * batch:.1f})" if ideal is not None else "")
    if key in MEASURED_IN and value is not None and busy_in(result, key):
        return f"{value} busy"
    return "-" if value is None else str(value)


def _in_order(result: dict) -> bool:
    """Whether the run decoded faster than the random-frame ceiling because its loader decodes in order."""
    share = result.get("decoded_frames_pct_of_random_ceiling")
    return share is not None and share > 100 and "random" not in result.get("decode_ceiling_exceeded", ())


def _group_rows(ok: list[dict]) -> list[tuple[str, list[str]] | None]:
    """The loader's and the source's own figures, each group under a heading row (None: a line above it), in
    words and units."""
    rows: list[tuple[str, list[str]] | None] = []
    for group, heading in GROUPS:
        keys = sorted({k for r in ok for k in r.get(group) or {}}, key=stat_order)
        if group == "resume_loader_stats":  # settings ("same") were shown in the window's group
            keys = [k for k in keys if any((r.get("loader_stats_merge") or {}).get(k) != "same"
                                           for r in ok if k in (r.get(group) or {}))]
        if not keys:
            continue
        config = (ok[0].get("config") or {})
        rows += [None, (f"[bold]{heading.format(loader=config.get('loader'), source=config.get('source'))}[/]",
                        ["" for _ in ok])]
        rows += [(f"  {stat_label(key)}", [stat_cell(key, (r.get(group) or {}).get(key),
                                                     (r.get("config") or {}).get("batch_size")) for r in ok])
                 for key in keys]
    return rows


def _results_table(ok: list[dict], columns: list[str], width: int) -> Table:
    """The table of the successful runs, one column per run (headed `columns`), for a console `width` wide: the
    labels' column as wide as its longest headline label where the runs' columns keep room for their longest word,
    so those labels stay on one line and the figures wrap at their spaces, never inside a number."""
    rows = [(label, [_cell(r, key) for r in ok]) for key, label in ROWS
            if any(r.get(key) is not None for r in ok)]  # rows no run reports (resume, for map) are left out
    longest = max(len(label) for label, _ in rows)  # a plugin's own figures' labels may wrap
    rows += _group_rows(ok)
    filled = [row for row in rows if row is not None]
    words = [max([len(w) for _, cells in filled for w in cells[i].split()] + [len(columns[i])])
             for i in range(len(ok))]
    room = width - 1 - 3 * (len(ok) + 1) - sum(words)  # less each column's border and padding
    table = Table(title="dl run results", header_style="bold")
    table.add_column("metric", width=max(min(longest, room), MIN_LABEL_WIDTH))
    for column in columns:
        table.add_column(column, justify="right", overflow="fold")
    for row in rows:
        if row is None:
            table.add_section()
        else:
            table.add_row(row[0], *row[1])
    return table


def describe_run(result: dict) -> str:
    """What a run name stands for: loader (a peer's library, order and value check), decoder, mode, workers,
    ranks."""
    config = result.get("config") or {}
    ranks = result.get("world_size") or config.get("world_size") or 1
    parts = [f"loader {config.get('loader')}", f"decoder {config.get('decoder')}", f"mode {config.get('mode')}",
             f"{config.get('num_workers')} DataLoader worker(s)", f"batch {config.get('batch_size')}"]
    if ranks > 1:
        parts.append(f"{ranks} ranks" if "rank" not in result else f"rank {result['rank']} of {ranks}")
    peer = result.get("peer")
    if peer:  # a peer loader: what it drives, how it orders samples, whether its values are dl's
        parts[0] += f" ({peer['library']}: {peer['order']}; {peer['values_line']})"
        parts[1] = "its own video decoding"
    return ", ".join(parts)


def describe_calibration(result: dict) -> str:
    """How `--decoder auto` chose: each decoder's measured frames/s (or why it cannot run here)."""
    calibration = result["decoder_calibration"]
    by = calibration["by"].removesuffix("_frames_per_s")
    parts = [f"{name} {r[calibration['by']]}" if "unavailable" not in r else f"{name} unavailable ({r['unavailable']})"
             for name, r in calibration["decoders"].items()]
    return (f"[bold]--decoder auto[/] chose {escape(str(calibration['chosen']))} by {by} frames/s per process: "
            f"{escape('; '.join(parts))}")


def codec_fixes(calibration: dict) -> list[str]:
    """One line per decoder that runs here but cannot decode the dataset's codec (`--decoder auto`): what, the
    decoder used instead, and the `dl transcode` command that would let it decode the dataset."""
    return [f"{name} {r['unavailable']}: decoding with {calibration['chosen']} instead. To decode with {name}, "
            f"re-encode the dataset: {r['fix']}" for name, r in calibration["decoders"].items() if r.get("fix")]


def describe_dataset(result: dict, default_dataset: bool) -> str:
    """The dataset a result measured: where it is (a local folder as its path), episodes, frames, fps, cameras;
    dl's default dataset is named as such, with its frame size and codec."""
    data = result.get("dataset") or {}
    cameras = data.get("cameras") or []
    root = str(data.get("root"))
    where = root.removeprefix("file://") if root.startswith("file:///") else root
    what = f"{data.get('episodes')} episodes, {data.get('frames')} frames at {data.get('fps')} fps, " + (
        f"{len(cameras)} camera(s) ({', '.join(cameras)})" if cameras else "no cameras")
    if default_dataset:
        from dl.bench.default_dataset import DEFAULT_CONFIG as c

        return f"dl's default synthetic dataset ({c.width}x{c.height} {c.codec.upper()} video) in {where}: {what}"
    return f"{where}: {what}"


def render_results(results: list[dict], console: Console, default_dataset: bool = False) -> None:
    """The dataset and what each run is, then the metrics table of the successful runs (one column per run:
    its name when it is the only one, else #1, #2... named above), then failed runs with their cause."""
    ok = [r for r in results if r.get("status") == "ok"]
    if ok:
        console.print(f"[bold]dataset:[/] {escape(describe_dataset(ok[0], default_dataset))}", highlight=False)
        labels = [r["name"] for r in ok] if len(ok) == 1 else [f"#{i}" for i in range(1, len(ok) + 1)]
        for label, result in zip(labels, ok, strict=True):
            head = (f"[bold]{escape(result['name'])}[/]" if len(ok) == 1
                    else f"[bold]{label}[/] {escape(result['name'])}")
            console.print(f"{head}: {escape(describe_run(result))}", highlight=False)
        for line in dict.fromkeys(describe_calibration(r) for r in ok if r.get("decoder_calibration")):
            console.print(line, highlight=False, soft_wrap=True)
        for line in dict.fromkeys(f for r in ok if r.get("decoder_calibration") for f in
                                  codec_fixes(r["decoder_calibration"])):
            console.print(line, highlight=False, soft_wrap=True, markup=False)
        console.print(_results_table(ok, labels, console.width))
        notes = [SPREAD_NOTE.format(limit=UNSTEADY_PCT)] if any(r.get(s) is not None for r in ok
                                                                for s in SPREADS.values()) else []
        for label, result in zip(labels, ok, strict=True):
            notes += unsteady_notes(label, result)
            if _in_order(result):
                notes.append(IN_ORDER_NOTE.format(run=label, loader=(result.get("config") or {}).get("loader")))
            if result.get("decode_ceiling_warning"):
                notes.append(f"{label}: {result['decode_ceiling_warning']}")
            if (result.get("machine_load") or {}).get("busy_line"):
                notes.append(f"{label}: {result['machine_load']['busy_line']}")
        for line in notes:  # wrapped at words to the console's width
            console.print(line, highlight=False, markup=False)
    for result in results:
        if result.get("status") != "ok":
            console.print(f"[bold red]{escape(str(result.get('name')))} failed:[/] {escape(str(result.get('error')))}",
                          highlight=False, soft_wrap=True)


def render_repeats(summary: list[dict], console: Console) -> None:
    """The repeats of each configuration (`dl.bench.repeats.summarize`): median (range) of each figure, then one line
    per pair whose samples/s ranges overlap."""
    from dl.bench.repeats import FIGURES, overlapping

    table = Table(title="repeats: median (range) per configuration", header_style="bold")
    for column in ("configuration", "runs", *(_REPEAT_LABELS[f] for f in FIGURES)):
        table.add_column(column, justify="left" if column == "configuration" else "right")
    for line in summary:
        cells = [f"{line[f]['median']:g} ({line[f]['min']:g}-{line[f]['max']:g})" if f in line else "-"
                 for f in FIGURES]
        table.add_row(escape(line["run"]), str(line["repeats"]), *cells)
    console.print(table)
    for text in overlapping(summary):
        console.print(text, highlight=False, markup=False)


_REPEAT_LABELS = {"samples_per_s": "samples/s with workers", "single_proc_samples_per_s": "samples/s without workers",
                  "first_batch_latency_s": "first batch s", "peak_rss_gb": "peak memory GB"}
