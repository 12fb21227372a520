"""`dl run` and decode: the decode ceiling every run reports (and its share of it), --decode-budget runs,
--decoder auto with its calibration, nvdec on a machine without a GPU."""

import json
import subprocess
import sys

import pytest
import torch

from dl.bench.ceiling import TRIALS, ceiling_shares
from dl.bench.results import merge_ceilings

QUICK = ["--duration", "1", "--warmup-batches", "1", "--single-proc-samples", "4", "--batch-size", "4"]


def dl_run(*args, cwd):
    cmd = [sys.executable, "-c", "from dl.cli.main import main; main()", "run", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)


def check_ceiling(result, processes):
    ceiling = result["decode_ceiling"]
    assert ceiling["decoder"] == "cpu" and ceiling["processes"] == processes and ceiling["seconds"] == 0.5
    assert ceiling["measured_in"].startswith(f"{processes} DataLoader worker(s)" if result["config"]["num_workers"]
                                             else "this process")
    for kind in ("random", "sequential"):
        trials = ceiling[f"{kind}_trials_frames_per_s"]
        assert len(trials) == TRIALS and ceiling[f"{kind}_frames_per_s"] == max(trials) > 0
        assert ceiling[f"{kind}_spread_pct"] == pytest.approx(100 * (max(trials) - min(trials)) / max(trials), abs=0.1)
        per_process = ceiling[f"{kind}_frames_per_s_per_process"]
        assert ceiling[f"{kind}_frames_per_s"] == pytest.approx(per_process * processes, abs=0.2)
        share = 100 * result["decoded_frames_per_s"] / ceiling[f"{kind}_frames_per_s"]
        assert result[f"decoded_frames_pct_of_{kind}_ceiling"] == pytest.approx(share, abs=0.06)


@pytest.mark.slow
def test_decode_budget_runs_with_the_ceiling(small_dataset, tmp_path):
    out = tmp_path / "out"
    done = dl_run("--root", str(small_dataset), "--loader", "pool", "--decode-budget", "0,4M", "--num-workers", "1",
                  "--loader-option", "episode_pool_size=2", "--out-dir", str(out), *QUICK, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    off, on = (json.loads((out / f"pool-cpu-single-w1-db{b}.json").read_text()) for b in ("0", "4M"))
    assert (off["loader_stats"]["decode_budget"], on["loader_stats"]["decode_budget"]) == (0, 4_000_000)
    assert off["loader_stats"]["decode_open_chunks"] == 0
    assert on["loader_stats"]["decode_open_chunks"] == 4_000_000 // (16 * 2 * 96 * 128 * 3) == 3
    assert on["loader_stats"]["frames_decoded"] > 0 and on["config"]["loader_options"]["decode_budget"] == "4M"
    for result in (off, on):
        check_ceiling(result, 1)
    assert "% of max decode rate, random frames" in done.stdout and "frames in order" in done.stdout


@pytest.mark.slow
def test_decoder_auto_times_the_decoders_and_records_the_choice(small_dataset, tmp_path):
    out = tmp_path / "out"
    done = dl_run("--root", str(small_dataset), "--decoder", "auto", "--num-workers", "0", "--ceiling-s", "0",
                  "--out-dir", str(out), *QUICK, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "map-cpu-single-w0.json").read_text())
    calibration = result["decoder_calibration"]
    assert calibration["chosen"] == result["config"]["decoder"] == "cpu" and calibration["by"] == "random_frames_per_s"
    assert calibration["decoders"]["cpu"]["random_frames_per_s"] > 0
    if not torch.cuda.is_available():
        assert "NVIDIA GPU" in calibration["decoders"]["nvdec"]["unavailable"]
    assert result["decode_ceiling"] is None and "decoded_frames_pct_of_random_ceiling" not in result
    assert "--decoder auto chose cpu by random frames/s per process" in done.stdout


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_decoder_auto_refuses_decoder_options_and_bad_budgets_are_refused(small_dataset, tmp_path):
    done = dl_run("--root", str(small_dataset), "--decoder", "auto", "--decoder-option", "cache_size=2", cwd=tmp_path)
    assert done.returncode == 2 and "give --decoder NAME to set decoder options (cache_size)" in done.stderr
    done = dl_run("--root", str(small_dataset), "--loader", "pool", "--decode-budget", "lots", cwd=tmp_path)
    assert done.returncode == 2 and "--decode-budget" in done.stderr and "512M" in done.stderr
    done = dl_run("--root", str(small_dataset), "--decode-budget", "1M", cwd=tmp_path)  # map has no budget
    assert done.returncode == 2 and "does not take option decode_budget" in done.stderr


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: nvdec runs here")
def test_nvdec_run_without_a_gpu_fails_with_the_reason(small_dataset, tmp_path):
    out = tmp_path / "out"
    done = dl_run("--root", str(small_dataset), "--decoder", "nvdec", "--num-workers", "0", "--out-dir", str(out),
                  *QUICK, cwd=tmp_path)
    result = json.loads((out / "map-nvdec-single-w0.json").read_text())
    assert done.returncode == 1 and result["status"] == "failed"
    assert "decoder nvdec needs an NVIDIA GPU" in result["error"] and "Use --decoder cpu" in result["error"]


def test_ranks_ceilings_merge_into_the_run_line():
    ranks = [{"decoder": "cpu", "seconds": 1.0, "processes": 2, "random_frames_per_s_per_process": 100.0,
              "sequential_frames_per_s_per_process": 300.0, "random_frames_per_s": 200.0,
              "sequential_frames_per_s": 600.0},
             {"decoder": "cpu", "seconds": 1.0, "processes": 2, "random_frames_per_s_per_process": 120.0,
              "sequential_frames_per_s_per_process": 280.0, "random_frames_per_s": 240.0,
              "sequential_frames_per_s": 560.0}]
    merged = merge_ceilings(ranks)
    assert merged == {"decoder": "cpu", "seconds": 1.0, "processes": 4, "random_frames_per_s_per_process": 110.0,
                      "sequential_frames_per_s_per_process": 290.0, "random_frames_per_s": 440.0,
                      "sequential_frames_per_s": 1160.0}
    assert ceiling_shares(220.0, merged) == {"decoded_frames_pct_of_random_ceiling": 50.0,
                                             "decoded_frames_pct_of_sequential_ceiling": 19.0}
    assert ceiling_shares(220.0, None) == {}
    ranks[1]["random_spread_pct"], ranks[0]["random_spread_pct"] = 4.0, 9.5
    assert merge_ceilings(ranks)["random_spread_pct"] == 9.5 and "sequential_spread_pct" not in merge_ceilings(ranks)


def test_a_share_above_100_percent_says_the_limit_measured_low_unless_decoding_in_order():
    ceiling = {"random_frames_per_s": 400.0, "sequential_frames_per_s": 1000.0, "random_spread_pct": 45.0,
               "sequential_spread_pct": 3.0}
    shares = ceiling_shares(600.0, ceiling)
    assert shares["decoded_frames_pct_of_random_ceiling"] == 150.0 and shares["decode_ceiling_exceeded"] == ["random"]
    assert "faster than the random ceiling" in shares["decode_ceiling_warning"]
    assert "random trials spread 45.0%" in shares["decode_ceiling_warning"]
    assert set(ceiling_shares(600.0, ceiling, in_order=True)) == {"decoded_frames_pct_of_random_ceiling",
                                                                  "decoded_frames_pct_of_sequential_ceiling"}
    both = ceiling_shares(1200.0, ceiling, in_order=True)
    assert both["decode_ceiling_exceeded"] == ["sequential"] and "sequential trials spread 3.0%" in both[
        "decode_ceiling_warning"]
