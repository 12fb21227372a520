"""End-to-end tests of `dl run`: benchmark results, failures, the default dataset; plus the benchmark's
zero-sample failure in-process."""

import csv
import json
import os
import pathlib

import pytest
import torch.utils.data
from cli_helpers import (
    FAST,
    LEROBOT_FIELDS,
    RUN_NAMES,
    dl_subprocess,
    invoke,
    result_files,
    rounding_slack,
)

import dl.bench.runner
from dl.bench.default_dataset import DATASET_TAG
from dl.bench.phase import RunFailed
from dl.bench.runner import run_benchmark
from dl.bench.single_process import single_process
from dl.bench.spec import RunSpec
from dl.contracts.needs import DataLoaderNeeds
from dl.testing.broken_cases import corrupt_payload
from dl.testing.synthetic import camera_key

# ------------------------------------------------------------------------------ the main benchmark


@pytest.fixture(scope="module")
def four_runs(small_dataset, tmp_path_factory):
    """`dl run` with 2 modes x 2 worker counts on the small dataset, once for this module."""
    tmp = tmp_path_factory.mktemp("cli-run")
    out = tmp / "out"
    proc = dl_subprocess("run", "--root", small_dataset, *FAST, "--num-workers", "0,1", "--mode", "single,sarm",
                         "--decoder-option", "cache_size=8", "--out-dir", out, cache_dir=tmp / "cache")
    return proc, out, small_dataset


@pytest.mark.slow
def test_run_writes_four_ok_results(four_runs):
    proc, out, _ = four_runs
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = result_files(out)
    assert [p.stem for p in files] == sorted(RUN_NAMES)
    assert sorted(p.name for p in (out / "specs").glob("*.json")) == sorted(
        [f"{n}.json" for n in RUN_NAMES] + ["metadata.json", "submission.json"])
    for path in files:
        result = json.loads(path.read_text())
        assert result["status"] == "ok", result
        assert result["name"] == path.stem
        for field in LEROBOT_FIELDS:
            assert field in result, (path.name, field)
            assert result[field] is not None, (path.name, field)
        assert result["samples_per_s"] > 0 and result["decoded_frames_per_s"] > 0
        assert result["single_proc_samples_per_s"] > 0 and result["single_proc_samples"] >= 4
        assert result["single_proc_s"] >= 0.5  # at least --single-proc-s, at most half the window: 1 s here
        assert result["single_proc_samples_per_s"] == pytest.approx(
            result["single_proc_samples"] / result["single_proc_s"], rel=0.01)
        assert result["window_samples"] > 0 and result["window_s"] > 0
        assert result["samples_per_s_spread_pct"] is None or result["samples_per_s_spread_pct"] >= 0
        assert result["fetch_pct"] + result["decode_pct"] == pytest.approx(100, abs=0.11)
        assert 0 < result["shuffle_randomness_frac"] <= 1
        assert result["p50_sample_latency_ms"] <= result["p95_sample_latency_ms"] <= result["p99_sample_latency_ms"]
        assert result["peak_rss_gb"] > 0 and result["first_batch_latency_s"] > 0 and result["total_time_s"] > 0
        cache = result["video_decoder_cache"]
        assert cache["capacity"] == 8  # --decoder-option reached the decoder
        assert cache["hits"] + cache["misses"] > 0 and 0 <= cache["hit_rate"] <= 1
        config = result["config"]
        assert config["num_workers"] == int(path.stem[-1]) and config["batch_size"] == 4
        assert config["mode"] == path.stem.split("-")[2]
        assert config["decoder_options"] == {"cache_size": 8}


@pytest.mark.slow
def test_run_dataset_summary_and_frames_per_sample(four_runs):
    proc, out, root = four_runs
    assert proc.returncode == 0, proc.stderr
    cams = [camera_key(0), camera_key(1)]
    for name in RUN_NAMES:
        result = json.loads((out / f"{name}.json").read_text())
        summary = result["dataset"]
        assert summary["root"] == f"file://{root}"
        assert summary["episodes"] == 6 and summary["fps"] == 30 and summary["cameras"] == cams
        sarm = "sarm" in name
        per_sample = 2 * (8 if sarm else 1)  # frames per camera per sample x 2 cameras
        if sarm:
            steps = [float(s) for s in range(8)]
            assert summary["delta_timestamps"] == {cams[0]: steps, cams[1]: steps, "action": steps}
        else:
            assert summary["delta_timestamps"] == {}
        # every sample decodes the same number of frames, so the two rates differ by exactly that factor
        assert abs(result["decoded_frames_per_s"] - per_sample * result["samples_per_s"]) <= rounding_slack(
            2, per_sample)
        window_rate = result["window_samples"] * per_sample / result["window_s"]
        assert result["decoded_frames_per_s"] == pytest.approx(window_rate, rel=1e-3)


@pytest.mark.slow
def test_run_results_csv(four_runs):
    proc, out, _ = four_runs
    assert proc.returncode == 0, proc.stderr
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["name"] for r in rows) == sorted(RUN_NAMES)
    columns = list(rows[0])
    assert columns[:2] == ["name", "status"]
    for field in LEROBOT_FIELDS:
        if field == "video_decoder_cache":
            assert {f"{field}.{k}" for k in ("hits", "misses", "evictions", "capacity")} <= set(columns)
        else:
            assert field in columns, field
    for row in rows:
        assert row["status"] == "ok"
        result = json.loads((out / f"{row['name']}.json").read_text())
        assert float(row["samples_per_s"]) == result["samples_per_s"]
        assert int(row["video_decoder_cache.misses"]) == result["video_decoder_cache"]["misses"]


@pytest.mark.slow
def test_run_prints_results_table(four_runs):
    proc, out, _ = four_runs
    assert proc.returncode == 0, proc.stderr
    assert "dl run results" in proc.stdout and "samples/s" in proc.stdout
    for name in RUN_NAMES:
        assert name in proc.stdout
    assert f"{out}/results.csv" in proc.stdout


# -------------------------------------------------------------------------------------- failures


def test_run_with_missing_video_fails_before_running(small_dataset, writable_copy, tmp_path):
    root = writable_copy(small_dataset)
    missing = f"videos/{camera_key(1)}/chunk-000/file-001.mp4"
    (root / missing).unlink()
    result = invoke("run", "--root", root, *FAST, "--num-workers", "0", "--out-dir", tmp_path / "out")
    assert result.exit_code != 0
    assert missing in result.output and "3-5" in result.output
    assert not (tmp_path / "out").exists()  # nothing was scheduled


@pytest.mark.slow
def test_run_with_episodes_excluding_missing_video(small_dataset, writable_copy, tmp_path):
    root = writable_copy(small_dataset)
    (root / f"videos/{camera_key(1)}/chunk-000/file-001.mp4").unlink()
    out = tmp_path / "out"
    result = invoke("run", "--root", root, *FAST, "--num-workers", "0", "--episodes", "0-2", "--out-dir", out)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "map-cpu-single-w0.json").read_text())
    assert data["status"] == "ok" and data["config"]["episodes"] == [0, 1, 2]
    assert data["dataset"]["episodes"] == 3


def test_run_unknown_loader(small_dataset, tmp_path):
    result = invoke("run", "--root", small_dataset, "--loader", "nope", "--out-dir", tmp_path / "out")
    assert result.exit_code == 2
    assert "unknown loader 'nope'" in result.output
    assert "registered loaders: " in result.output and " map, " in result.output
    assert not (tmp_path / "out").exists()


def test_run_unknown_decoder(small_dataset, tmp_path):
    result = invoke("run", "--root", small_dataset, "--decoder", "gpu9000", "--out-dir", tmp_path / "out")
    assert result.exit_code == 2 and "gpu9000" in result.output and "cpu" in result.output


@pytest.mark.parametrize("episodes", ["3-1", "x", "1,,2"])
def test_run_bad_episodes(small_dataset, tmp_path, episodes):
    result = invoke("run", "--root", small_dataset, "--episodes", episodes, "--out-dir", tmp_path / "out")
    assert result.exit_code == 2
    assert "--episodes" in result.output and repr(episodes) in result.output


def test_run_episode_not_in_dataset(small_dataset, tmp_path):
    result = invoke("run", "--root", small_dataset, "--episodes", "4-9", "--out-dir", tmp_path / "out")
    assert result.exit_code == 2 and "6-9" in result.output and "0-5" in result.output


def test_run_bogus_mode(small_dataset, tmp_path):
    result = invoke("run", "--root", small_dataset, "--mode", "single,bogus", "--out-dir", tmp_path / "out")
    assert result.exit_code == 2
    assert "bogus" in result.output and "--mode" in result.output and "sarm" in result.output


@pytest.mark.parametrize("args, hint", [
    (["--num-workers", "two"], "--num-workers"),
    (["--delta-timestamps", "action"], "--delta-timestamps"),
    (["--decoder-option", "cache_size"], "--decoder-option"),
    (["--scenario", "nope"], "--scenario"),
    (["--batch-size", "0"], "--batch-size"),
])
def test_run_bad_options(small_dataset, tmp_path, args, hint):
    result = invoke("run", "--root", small_dataset, *args, "--out-dir", tmp_path / "out")
    assert result.exit_code == 2 and hint in result.output


def test_run_not_a_dataset(tmp_path):
    (tmp_path / "empty").mkdir()
    result = invoke("run", "--root", tmp_path / "empty", "--out-dir", tmp_path / "out")
    assert result.exit_code == 2 and "meta/info.json" in result.output
    result = invoke("run", "--root", tmp_path / "nope", "--out-dir", tmp_path / "out")
    assert result.exit_code == 2 and "no such folder" in result.output


@pytest.mark.slow
def test_run_failing_in_the_child_exits_non_zero(small_dataset, writable_copy, tmp_path):
    # the files exist and their headers open (so the up-front checks pass), but episode 4's video payload is corrupt
    root = writable_copy(small_dataset)
    corrupt_payload(root, f"videos/{camera_key(0)}/chunk-000/file-001.mp4")
    out = tmp_path / "out"
    result = invoke("run", "--root", root, *FAST, "--num-workers", "0", "--episodes", "4", "--out-dir", out)
    assert result.exit_code == 1
    data = json.loads((out / "map-cpu-single-w0.json").read_text())
    assert data["status"] == "failed" and "file-001.mp4" in data["error"]
    assert "map-cpu-single-w0 failed" in result.output
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["name"], r["status"]) for r in rows] == [("map-cpu-single-w0", "failed")]


@pytest.mark.slow
def test_warmup_longer_than_the_dataset_runs_more_epochs(dataset_factory, tmp_path):
    root = dataset_factory(episodes=1, frames_per_episode=(12, 12), cameras=1, episodes_per_file=1)
    out = tmp_path / "out"
    result = invoke("run", "--root", root, "--duration", "0.5", "--warmup-batches", "10", "--single-proc-samples",
                    "2", "--batch-size", "4", "--num-workers", "0", "--out-dir", out)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "map-cpu-single-w0.json").read_text())
    assert data["status"] == "ok" and data["window_samples"] > 0
    assert data["epochs_completed"] >= 3  # 10 warm-up batches of 3 per epoch


class _Empty:
    """A loader (dl.contracts.loader.Loader) over the real one's dataset that yields nothing."""

    def __init__(self, real):
        self.meta, self.decoder, self.config, self.episodes = real.meta, real.decoder, real.config, real.episodes

    def dataloader_needs(self):
        return DataLoaderNeeds()


class _EmptyStream(_Empty, torch.utils.data.IterableDataset):
    def __iter__(self):
        return iter(())


class _EmptyMap(_Empty, torch.utils.data.Dataset):
    def __len__(self):
        return 0

    def __getitem__(self, i):
        raise IndexError(i)


def _empty_build(kind):
    real = dl.bench.runner._build

    def build(spec):
        built, delta, metadata_s = real(spec)
        built.loader = (_EmptyStream if kind == "iterable" else _EmptyMap)(built.loader)
        return built, delta, metadata_s

    return build


def test_zero_samples_fails_loudly(small_dataset, monkeypatch, tmp_path):
    monkeypatch.setattr(dl.bench.runner, "_build", _empty_build("iterable"))
    spec = RunSpec(root=str(small_dataset), num_workers=0, duration=0.5, warmup_batches=0, single_proc_samples=2)
    with pytest.raises(RunFailed, match="0 samples"):
        run_benchmark(spec)
    spec_path, result_path = tmp_path / "spec.json", tmp_path / "result.json"
    spec_path.write_text(json.dumps(spec.to_dict()))
    assert dl.bench.runner.main([str(spec_path), str(result_path)]) == 1
    data = json.loads(result_path.read_text())
    assert data["status"] == "failed" and "0 samples" in data["error"] and data["name"] == spec.name


def test_zero_samples_map_dataset_fails_with_run_failed(small_dataset, monkeypatch):
    monkeypatch.setattr(dl.bench.runner, "_build", _empty_build("map"))
    spec = RunSpec(root=str(small_dataset), num_workers=0, duration=0.5, warmup_batches=0, single_proc_samples=2)
    with pytest.raises(RunFailed, match="0 samples"):
        run_benchmark(spec)


# ------------------------------------------------------------------------------------ default root


@pytest.mark.slow
def test_run_without_root_generates_the_default_dataset(tmp_path):
    cache = tmp_path / "cache"
    out = tmp_path / "out"
    proc = dl_subprocess("run", "--duration", "0.5", "--warmup-batches", "1", "--single-proc-samples", "2",
                         "--batch-size", "4", "--num-workers", "0", "--out-dir", out, cache_dir=cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    default = cache / "datasets" / f"default-{DATASET_TAG}"
    assert (default / "meta/info.json").is_file()
    assert "generating dl's embedded default dataset" in proc.stdout
    data = json.loads((out / "map-cpu-single-w0.json").read_text())
    assert data["status"] == "ok"
    assert data["dataset"]["root"] == f"file://{default}"
    assert data["dataset"]["episodes"] == 24 and len(data["dataset"]["cameras"]) == 2
    info = json.loads((default / "meta/info.json").read_text())
    assert info["features"][camera_key(0)]["info"]["video.codec"] == "av1"


def test_run_without_root_with_empty_default_folder(tmp_path):
    default = pathlib.Path(os.environ["DL_CACHE_DIR"]) / "datasets" / f"default-{DATASET_TAG}"
    default.mkdir(parents=True)
    result = invoke("run", "--duration", "0.5", "--warmup-batches", "1", "--single-proc-samples", "2",
                    "--batch-size", "4", "--num-workers", "0", "--out-dir", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert (default / "meta/info.json").is_file()


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_dl_run_refuses_more_workers_than_the_machine_runs_before_running(small_dataset, tmp_path, monkeypatch):
    monkeypatch.delenv("DL_MAX_WORKERS", raising=False)
    proc = dl_subprocess("run", "--root", small_dataset, "--num-workers", "2,999", "--out-dir", tmp_path / "out",
                         cache_dir=tmp_path / "cache")
    assert proc.returncode == 2
    assert "--num-workers" in proc.stderr and "num_workers=999: this machine can run at most" in proc.stderr
    assert "set DL_MAX_WORKERS=999 to allow it" in proc.stderr
    assert not (tmp_path / "out").exists(), "nothing may run or be written"


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
@pytest.mark.parametrize("loader", ["map", "pool"])
def test_the_window_starts_at_the_same_epoch_however_long_the_timed_pass_ran(dataset_factory, loader):
    """The single-process pass is timed, so how many epochs it rolls over varies; ranks deal each epoch's episodes
    among themselves, so every rank's window must start at one epoch: the one after the pass's first."""
    dataset = dl.make_dataset(str(dataset_factory(episodes=3, frames_per_episode=(4, 4), cameras=0)), loader=loader)
    start = dataset.epoch
    spec = RunSpec(root="unused", num_workers=0, duration=4.0, warmup_batches=0, single_proc_samples=40)
    single = single_process(dataset, _NoDecode(), spec, lambda *a: None)
    assert single["single_proc_samples"] >= 40 > 3 * 4  # more samples than an epoch has frames: it rolled over
    assert dataset.epoch == start + 1


class _NoDecode:
    decode_s = 0.0
