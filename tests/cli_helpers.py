"""Shared constants and helpers of the command-line tests (test_cli.py, test_cli_commands.py)."""

import os
import pathlib
import subprocess
import sys

from click.testing import CliRunner

from dl.cli.main import cli

DL = pathlib.Path(sys.executable).with_name("dl")  # the console script of the environment running the tests
LEROBOT_FIELDS = ("samples_per_s", "decoded_frames_per_s", "single_proc_samples_per_s", "fetch_pct", "decode_pct",
                  "shuffle_randomness_frac", "first_batch_latency_s", "p50_sample_latency_ms",
                  "p95_sample_latency_ms", "p99_sample_latency_ms", "peak_rss_gb", "video_decoder_cache",
                  "total_time_s")
FAST = ["--duration", "1", "--warmup-batches", "1", "--single-proc-samples", "4", "--batch-size", "4"]
RUN_NAMES = ["map-cpu-single-w0", "map-cpu-single-w1", "map-cpu-sarm-w0", "map-cpu-sarm-w1"]


def env_with(**extra):
    return {**os.environ, "COLUMNS": "250", **extra}


def dl_subprocess(*args, cache_dir, timeout=300):
    return subprocess.run([str(DL), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=env_with(DL_CACHE_DIR=str(cache_dir)))


def invoke(*args):
    """`dl ARGS` in-process (runs still go to fresh processes through the local scheduler)."""
    return CliRunner(env={"COLUMNS": "250"}).invoke(cli, [str(a) for a in args], catch_exceptions=False)


def result_files(out_dir):
    return sorted(pathlib.Path(out_dir).glob("*.json"))


def rounding_slack(value_decimals=2, factor=1):
    """Largest difference between round(factor * x, d) and factor * round(x, d)."""
    return 0.5 * 10**-value_decimals * (factor + 1) + 1e-9
