"""The words `dl run`'s results table prints: one label per result field, with its unit, the figures of a loader or
source that reports its own (`dl.ReportsStats`) named in words with human-readable sizes and what they are summed
over, and the lines printed under the table. docs/benchmark.md's "Labels in the table" is `labels_markdown()`
(tests/test_docs.py holds the two to each other)."""

import re

UNSTEADY_PCT = 50.0
"""A rate whose spread is above this many % is marked unsteady: it is no figure to compare."""

ROWS = (
    ("samples_per_s", "samples/s with workers (spread)"),
    ("decoded_frames_per_s", "video frames/s"),
    ("decoded_frames_pct_of_random_ceiling", "% of max decode rate, random frames"),
    ("decoded_frames_pct_of_sequential_ceiling", "% of max decode rate, frames in order"),
    ("single_proc_samples_per_s", "samples/s without workers (spread)"),
    ("fetch_pct", "  of its time: reading rows, converting, %"),
    ("decode_pct", "  of its time: decoding video, %"),
    ("shuffle_randomness_frac", "distinct episodes per batch (uniform draw)"),
    ("init_s", "dataset built in, s"),
    ("first_batch_latency_s", "first batch after iter(), s"),
    ("p50_sample_latency_ms", "ms per sample, median"),
    ("p95_sample_latency_ms", "ms per sample, 95th percentile"),
    ("p99_sample_latency_ms", "ms per sample, 99th percentile"),
    ("peak_rss_gb", "peak memory, all processes, GB"),
    ("pss_gb_at_window_end", "memory at window end, no page counted twice, GB"),
    ("video_decoder_cache", "video reads from an open decoder / decoders opened"),
    ("window_samples", "samples measured"),
    ("resume_first_batch_s", "first batch after a resume, s"),
    ("total_time_s", "run time, s"),
)
"""(result field, row label), in the table's order; a row no run reports is left out."""

CELLS = {
    "samples_per_s": "rate (spread %), marked `unsteady` over 50% and `busy` when other processes took over a quarter "
                     "of the cores (`machine_load`)",
    "decoded_frames_pct_of_random_ceiling": "% of `decode_ceiling.random_frames_per_s` (how much its trials varied); "
                                            "`in order` over 100% when the loader decodes in order, `limit measured "
                                            "low` when the ceiling was (`decode_ceiling_exceeded`)",
    "decoded_frames_pct_of_sequential_ceiling": "% of `decode_ceiling.sequential_frames_per_s` (how much its trials "
                                                "varied)",
    "single_proc_samples_per_s": "rate (`single_proc_spread_pct` %), marked `unsteady` over 50%",
    "shuffle_randomness_frac": "mean distinct episodes in a batch (`shuffle_randomness_frac` x batch size) `of` the "
                               "batch size (what a uniform draw of frames gives: `shuffle_randomness_ideal` x batch "
                               "size); `dl report` shows the same",
    "video_decoder_cache": "`video_decoder_cache.hits` / `.misses`",
    "init_s": "the value, then its parts where the run reports them: `listing_s`, `metadata_read_s`, `checks_s`, "
              "`index_reads_s` (`dl.format.load_times`; listing and reading measured where the metadata was read)",
}
"""What a cell shows where it is more than the field's value."""
INIT_PARTS = {"listing_s": "listing", "metadata_read_s": "metadata", "checks_s": "checks",
              "index_reads_s": "index reads"}
"""The parts of "dataset built in" (`init_s`) its cell names, in the order opening a dataset goes through them."""

GROUPS = (("loader_stats", "{loader} loader: its own figures"),
          ("resume_loader_stats", "{loader} loader over the resume probe"),
          ("source_stats", "{source} source: its own figures"))
"""The result's groups of a plugin's own figures, each under a heading row; the resume group leaves out the
settings (merge rule "same"), which the first group shows."""

STATS = {
    # the pool loader (a consumer: a DataLoader worker, or the run's process with 0 workers)
    "episode_pool_size": "episodes in each worker's pool",
    "episodes_admitted": "episodes read into pools, all workers",
    "pool_bytes_peak": "peak rows held in pools, sum of workers",
    "shuffle_randomness_consumer_ideal": "distinct episodes/batch, worker's ideal",
    "decode_budget": "decoded frames a worker may hold",
    "decode_open_chunks": "chunks each worker decodes at once",
    "decode_chunk_frames": "frames per decoded chunk",
    "chunks_decoded": "chunks decoded, all workers",
    "frames_decoded": "frames decoded, all workers",
    "decode_buffer_bytes_peak": "peak decoded frames held, sum of workers",
    "resume_fast_forward_s": "longest worker replay to the resume point, s",
    # a mixture (`dl run --mix`)
    "members": "members",
    "weights": "members' weights",
    "samples_per_epoch": "samples per mixture epoch",
    # a remote source, summed over the run's process and its workers
    "requests": "requests to the store, all processes",
    "bytes_fetched": "fetched, all processes",
    "bytes_needed": "needed by the episodes admitted",
    "read_amplification": "fetched / needed (1 = each needed byte once)",
    "retries": "requests retried",
    "throttled_429": "  of which throttled (429)",
    "server_errors": "  of which server errors (5xx)",
    "failures": "requests given up",
    "cache_hits": "reads from cached blocks",
    "remote_reads": "reads over the network",
    "ranges_prefetched": "downloads ahead",
    "bytes_prefetched": "downloaded ahead",
    "network_wait_s": "readers waiting on the network, s, summed",
    "metadata_s": "metadata and file indexes, s (host)",
}
"""Labels of the figures the built-in plugins report (`dl.ReportsStats.figures`); a figure not named here shows
as its field name in words. A figure whose field names bytes (or `decode_budget`) shows as a size (MB, GB)."""

MEMBER_STATS = {"samples": "samples drawn", "epochs_started": "its epochs started, most of a worker",
                "quota": "samples per mixture epoch", "passes_per_epoch": "passes over it per mixture epoch"}
"""Labels of a mixture's per-member figures, `member{M}_{figure}`."""

SPREAD_NOTE = ("spread: how much a rate varied while measured, the 10th to 90th percentile of its 1 s blocks' rates "
               "(0.5 s without workers) over their median (docs/benchmark.md); over {limit:g}% it is marked unsteady: "
               "not a rate to compare.")
"""Printed under the table whenever a rate shows its spread."""

IN_ORDER_NOTE = ("{run}: above 100% of the random-frame rate because the {loader} loader decodes runs of frames in "
                 "order, which costs less per frame than the random single frames that rate times; the in-order rate "
                 "is its limit.")
"""Printed under the table for a run that decodes faster than the random-frame ceiling, as in-order decode may."""


def unsteady_notes(run: str, result: dict) -> list[str]:
    """One line per unsteady rate of `result` (spread over `UNSTEADY_PCT`): for the steady window, how many of its
    whole seconds had no batch (from `throughput_timeline`), else how much its blocks' rates varied."""
    out = []
    for key, spread_key, what, block in (("samples_per_s", "samples_per_s_spread_pct", "samples/s", "1 s"),
                                         ("single_proc_samples_per_s", "single_proc_spread_pct",
                                          "samples/s without workers", "0.5 s")):
        spread = result.get(spread_key)
        if spread is None or spread <= UNSTEADY_PCT:
            continue
        empty = _empty_seconds(result.get("throughput_timeline")) if key == "samples_per_s" else None
        why = (f"{empty[0]} s of {empty[1]} s had no batch" if empty and empty[0] else
               f"its {block} blocks' rates varied by {spread:g}% of their median")
        out.append(f"{run}: {what} {result.get(key)} is unsteady: {why}.")
    return out


def _empty_seconds(timeline: dict | None) -> tuple[int, int] | None:
    """(whole timeline bins of the steady window without a sample, whole bins of the window), 1 s bins."""
    if not timeline or timeline.get("window_start_s") is None:
        return None
    width, bins = timeline["bin_s"], timeline["samples_per_bin"][:-1]  # the last bin is partial
    first = -int(-timeline["window_start_s"] // width)  # the first bin wholly inside the window
    window = bins[first:]
    return sum(n == 0 for n in window), len(window)


def is_size(key: str) -> bool:
    """Whether figure `key` counts bytes."""
    return "bytes" in key.split("_") or key == "decode_budget"


def format_size(n: float) -> str:
    """Bytes in decimal units: 353894400 -> "353.9 MB", 256000000 -> "256 MB", 1500000000 -> "1.5 GB"."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n:g} B"


def stat_order(key: str) -> tuple:
    """Where figure `key` goes among its group's rows: `STATS`' order (settings first), then by name."""
    names = list(STATS)
    return (names.index(key), key) if key in names else (len(names), key)


def stat_label(key: str) -> str:
    """The words for loader or source figure `key`."""
    member = re.fullmatch(r"member(\d+)_(\w+)", key)
    if member and member.group(2) in MEMBER_STATS:
        return f"member {member.group(1)}: {MEMBER_STATS[member.group(2)]}"
    return STATS.get(key) or key.replace("_", " ")


def stat_cell(key: str, value, batch_size: int | None = None) -> str:
    """A loader or source figure as the table shows it: a size for bytes, "x of batch" for a distinct-episode
    fraction, seconds to the ms, "-" for none."""
    if value is None:
        return "-"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if is_size(key):
            return format_size(value)
        if key == "shuffle_randomness_consumer_ideal" and batch_size:
            return f"{value * batch_size:.1f} of {batch_size}"
        if key == "read_amplification":
            return f"{value:.2f}x"
        if key.endswith("_s") and isinstance(value, float):
            return f"{value:.3f}"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def labels_markdown() -> str:
    """The "Labels in the table" section of docs/benchmark.md (between its generated-text markers)."""
    lines = ["| label | field | cell |", "|---|---|---|"]
    lines += [f"| {label.strip()} | `{key}` | {CELLS.get(key, 'the value')} |" for key, label in ROWS]
    lines += ["", "Under a heading per group (" + ", ".join(f"`{g}`" for g, _ in GROUPS) + "), a plugin's own "
              "figures (sizes in MB/GB; the JSON keeps the fields and raw numbers):", "",
              "| label | field |", "|---|---|"]
    lines += [f"| {label.strip()} | `{key}` |" for key, label in STATS.items()]
    lines += [f"| member M: {label} | `memberM_{key}` |" for key, label in MEMBER_STATS.items()]
    lines += ["", "Under the table:", "", f"- {SPREAD_NOTE.format(limit=UNSTEADY_PCT)}",
              "- per unsteady rate: `RUN: samples/s RATE is unsteady: N s of M s had no batch.` (or how much its "
              "blocks' rates varied)",
              f"- {IN_ORDER_NOTE.format(run='RUN', loader='LOADER')}"]
    return "\n".join(lines)

