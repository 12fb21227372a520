"""`dl run` with the pool loader: its extra figures, the resume probe, and the two-rank gloo scenario."""

import json
import subprocess
import sys

import pytest

QUICK = ["--duration", "1", "--warmup-batches", "1", "--single-proc-samples", "4", "--batch-size", "4"]


def dl_run(*args, cwd):
    cmd = [sys.executable, "-c", "from dl.cli.main import main; main()", "run", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_pool_run_reports_pool_figures_and_resume(small_dataset, tmp_path):
    out = tmp_path / "out"
    done = dl_run("--root", str(small_dataset), "--loader", "pool", "--loader-option", "episode_pool_size=2",
                  "--num-workers", "2", "--out-dir", str(out), *QUICK, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "pool-cpu-single-w2.json").read_text())
    assert result["status"] == "ok" and result["samples_per_s"] > 0
    stats = result["loader_stats"]
    assert stats["episode_pool_size"] == 2
    assert stats["episodes_admitted"] >= 6  # every episode of the 6 was admitted at least once
    assert 0 < stats["pool_bytes_peak"] < 2 * 2 * 40 * 1024  # 2 consumers x 2 episodes of <= 40 rows, < 1 KiB/row
    assert 0 < stats["shuffle_randomness_consumer_ideal"] <= 1
    assert result["resume_first_batch_s"] > 0
    state = result["resume_state"]
    assert {"epoch", "batches_consumed", "batch_size", "invariants", "shape"} <= set(state) and state["batch_size"] == 4
    assert "episodes read into pools, all workers" in done.stdout  # the table shows the loader's figures, in words


@pytest.mark.slow
def test_two_rank_scenario_writes_rank_results_and_a_merged_line(small_dataset, tmp_path):
    out = tmp_path / "out"
    done = dl_run("--root", str(small_dataset), "--scenario", "stream_local_2rank", "--num-workers", "1",
                  "--loader-option", "episode_pool_size=2", "--out-dir", str(out), *QUICK, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    name = "stream_local_2rank-cpu-single-w1-r2"
    ranks = [json.loads((out / f"{name}-rank{r}.json").read_text()) for r in (0, 1)]
    merged = json.loads((out / f"{name}.json").read_text())
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["status"] == "ok" for r in ranks)
    assert merged["status"] == "ok" and merged["world_size"] == 2 and len(merged["ranks"]) == 2
    assert merged["samples_per_s"] == pytest.approx(sum(r["samples_per_s"] for r in ranks), abs=0.01)
    assert merged["peak_rss_gb"] == pytest.approx(sum(r["peak_rss_gb"] for r in ranks), abs=0.002)
    assert merged["first_batch_latency_s"] == max(r["first_batch_latency_s"] for r in ranks)
    assert merged["loader_stats"]["episode_pool_size"] == 2
    assert merged["loader_stats"]["episodes_admitted"] == sum(r["loader_stats"]["episodes_admitted"] for r in ranks)
    ceiling = merged["decode_ceiling"]  # every rank measured its own; the run's is their sum
    assert ceiling["processes"] == 2 and ceiling["random_frames_per_s"] == pytest.approx(
        sum(r["decode_ceiling"]["random_frames_per_s"] for r in ranks), abs=0.2)
    assert merged["decoded_frames_pct_of_random_ceiling"] == pytest.approx(
        100 * merged["decoded_frames_per_s"] / ceiling["random_frames_per_s"], abs=0.06)
    rows = (out / "results.csv").read_text().splitlines()
    assert len(rows) == 4  # header + 2 ranks + merged
