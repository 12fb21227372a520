"""`dl run`'s results table (`dl.cli.render`, words from `dl.cli.labels`): every row in words with its unit, an
unsteady rate marked and explained under the table, a decode share above the random-frame ceiling explained, a
loader's own figures under a heading with sizes in MB and without the settings repeated for the resume probe, and at
80 columns no line wider than 80 and no figure split."""

import io
import re

from rich.console import Console

from dl.cli.labels import ROWS, STATS, format_size, stat_label
from dl.cli.render import render_results

POOL_STATS = {"episode_pool_size": 16, "episodes_admitted": 72, "pool_bytes_peak": 251328, "decode_budget": 256000000,
              "decode_open_chunks": 217, "decode_chunk_frames": 16, "chunks_decoded": 573, "frames_decoded": 17418,
              "decode_buffer_bytes_peak": 353894400, "shuffle_randomness_consumer_ideal": 0.5596}
MERGE = {"episode_pool_size": "same", "decode_budget": "same", "decode_open_chunks": "same",
         "decode_chunk_frames": "same", "episodes_admitted": "sum", "pool_bytes_peak": "sum", "chunks_decoded": "sum",
         "frames_decoded": "sum", "decode_buffer_bytes_peak": "sum", "shuffle_randomness_consumer_ideal": "mean",
         "resume_fast_forward_s": "max"}


def pool_result(name="pool-cpu-single-w2", **over):
    """A pool run's result as the runner writes it: unsteady single-process rate, a window with two empty seconds,
    decoding above the random-frame ceiling in order."""
    result = {
        "name": name, "status": "ok", "samples_per_s": 1463.15, "samples_per_s_spread_pct": 220.7,
        "decoded_frames_per_s": 2926.3, "decoded_frames_pct_of_random_ceiling": 136.0,
        "decoded_frames_pct_of_sequential_ceiling": 30.4,
        "decode_ceiling": {"random_frames_per_s": 2151.7, "sequential_frames_per_s": 9620.4, "random_spread_pct": 8.0,
                           "sequential_spread_pct": 17.7},
        "single_proc_samples_per_s": 258.41, "single_proc_spread_pct": 34.0, "fetch_pct": 89.0, "decode_pct": 11.0,
        "shuffle_randomness_frac": 0.557, "shuffle_randomness_ideal": 0.737, "init_s": 3.329,
        "first_batch_latency_s": 0.4, "p50_sample_latency_ms": 0.396, "p95_sample_latency_ms": 2.165,
        "p99_sample_latency_ms": 4.693, "peak_rss_gb": 1.32, "pss_gb_at_window_end": 0.515,
        "video_decoder_cache": {"hits": 1148, "misses": 46}, "window_samples": 7342, "resume_first_batch_s": 0.268,
        "total_time_s": 16.926,
        "throughput_timeline": {"bin_s": 1.0, "samples_per_bin": [656, 2128, 0, 1664, 0, 1280, 464],
                                "last_bin_s": 0.27, "window_start_s": 1.25},
        "loader_stats": POOL_STATS, "loader_stats_merge": MERGE,
        "resume_loader_stats": {**POOL_STATS, "episodes_admitted": 11, "resume_fast_forward_s": 0.19316},
        "dataset": {"root": "file:///data/open50", "episodes": 43, "frames": 20000, "fps": 30, "cameras": ["top"]},
        "config": {"loader": "pool", "decoder": "cpu", "mode": "single", "num_workers": 2, "batch_size": 16,
                   "source": "local"},
    }
    return {**result, **over}


def render(results, width):
    out = io.StringIO()
    render_results(results, Console(file=out, width=width, color_system=None))
    return out.getvalue()


def test_every_row_is_in_words_with_the_figures_in_units():
    text = render([pool_result()], width=250)
    for _, label in ROWS:
        assert label.strip() in text
    assert "dataset: /data/open50: 43 episodes" in text  # a local folder as its path, not file:///
    assert "2.2e+03" not in text and "136.0% of 2,152 frames/s, in order" in text  # the ceiling with its unit
    assert "8.9 of 16 (uniform 11.8)" in text  # distinct episodes in a batch of 16, and the ideal
    assert "1463.15 (220.7%) unsteady" in text and "258.41 (34%)" in text and "258.41 (34%) unsteady" not in text
    notes = text.split("dl run results")[1]
    assert "10th to 90th percentile" in notes
    assert "pool-cpu-single-w2: samples/s 1463.15 is unsteady: 2 s of 4 s had no batch." in notes
    assert "decodes runs of frames in order" in notes  # why 136% of a ceiling is no error


def test_a_loaders_own_figures_are_named_sized_and_grouped():
    text = render([pool_result()], width=250)
    assert "pool loader: its own figures" in text and "pool loader over the resume probe" in text
    for key in POOL_STATS:
        assert re.search(rf"\b{key}\b", text) is None, f"raw field name {key} printed"
        assert STATS[key] in text
    assert f"{STATS['decode_budget']} " in text and "256 MB" in text and "353.9 MB" in text  # sizes, not bytes
    assert "256000000" not in text and "353894400" not in text
    resume = text.split("pool loader over the resume probe")[1]
    assert STATS["decode_budget"] not in resume and STATS["episode_pool_size"] not in resume  # settings shown once
    assert STATS["episodes_admitted"] in resume and "0.193" in resume


def test_stat_labels_and_sizes():
    assert format_size(353894400) == "353.9 MB" and format_size(256_000_000) == "256 MB"
    assert format_size(1_500_000_000) == "1.5 GB" and format_size(512) == "512 B"
    assert stat_label("member1_samples") == "member 1: samples drawn"
    assert stat_label("some_new_figure") == "some new figure"  # a plugin's figure this table does not know


def test_at_80_columns_nothing_is_wider_and_no_figure_is_split():
    results = [pool_result(), pool_result("map-cpu-single-w2", loader_stats={}, resume_loader_stats={}),
               pool_result("map-cpu-single-w0")]
    text = render(results, width=80)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80
    cells = [c.strip() for line in lines for c in line.split("│")]
    for figure in ("1463.15", "2926.3", "258.41", "17418", "353.9", "16.926", "1148/46"):
        assert figure in cells or any(c.startswith(figure + " ") or c.endswith(" " + figure) for c in cells), figure


def test_at_80_columns_two_runs_keep_every_label_on_one_line():
    text = render([pool_result(), pool_result("map-cpu-single-w2", loader_stats={}, resume_loader_stats={})],
                  width=80)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80
    labels = {cells[1].strip() for cells in (line.split("│") for line in lines) if len(cells) > 2}
    for _, label in ROWS:
        assert label.strip() in labels, label


def test_the_default_dataset_is_named_once_by_its_path():
    from dl.bench.default_dataset import DEFAULT_CONFIG as c
    from dl.cli.render import describe_dataset

    result = pool_result(dataset={"root": "file:///cache/dl/default", "episodes": 24, "frames": 2911, "fps": 30,
                                  "cameras": ["cam0"]})
    assert describe_dataset(result, default_dataset=True) == (
        f"dl's default synthetic dataset ({c.width}x{c.height} {c.codec.upper()} video) in /cache/dl/default: 24 "
        "episodes, 2911 frames at 30 fps, 1 camera(s) (cam0)")


def test_a_failed_runs_error_is_printed_as_written():
    """An error naming an option's form (`[height, width]`) is not taken for rich markup."""
    error = "decoder cpu: resize_depth scales depth cameras to resize; give resize=[height, width] too."
    text = render([{"name": "map-cpu-single-w2", "status": "failed", "error": error}], 200)
    assert f"map-cpu-single-w2 failed: {error}" in text
