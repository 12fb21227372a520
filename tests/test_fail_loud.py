"""Every failure is one clear line with the right exit status, never a traceback (issue 4/7): bad files, bad
options, exceptions of any kind in a run process, a run process killed, Ctrl-C and SIGTERM."""

import csv
import json
import os
import signal
import subprocess
import time

import psutil
import pytest
from cli_helpers import DL, dl_subprocess, env_with
from plugin_helpers import fake_distribution

FAST = ["--duration", "0.5", "--warmup-batches", "1", "--single-proc-samples", "2", "--batch-size", "4"]
DATA0 = "data/chunk-000/file-000.parquet"

BOOM = '''
import os, signal
from dl import hookimpl
from dl.plugins.map.dataset import MapDataset


class BoomAtSample(MapDataset):
    def __getitem__(self, i):
        if i % 5 == 4:
            return 1 / 0
        return super().__getitem__(i)


def boom_at_build(meta, decoder, config):
    raise RuntimeError("the plugin broke while building")


def killed(meta, decoder, config):
    os.kill(os.getpid(), signal.SIGKILL)


@hookimpl
def register_loaders(register):
    register("boom_sample", BoomAtSample, "raises ZeroDivisionError on some samples")
    register("boom_build", boom_at_build, "raises RuntimeError when built")
    register("killed", killed, "its run process is killed")
'''


def no_traceback(proc):
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc


def last_error_line(proc) -> str:
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert lines and lines[-1].startswith("Error: "), proc.stderr
    return lines[-1]


# ------------------------------------------------------------------------------ bad files


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_info_json_that_is_not_json(small_dataset, writable_copy, tmp_path):
    root = writable_copy(small_dataset)
    text = (root / "meta/info.json").read_text()
    (root / "meta/info.json").write_text(text[:200])  # cut off mid-document
    proc = no_traceback(dl_subprocess("run", "--root", root, "--out-dir", tmp_path / "out", cache_dir=tmp_path))
    assert proc.returncode == 2
    line = last_error_line(proc)
    assert "meta/info.json is not valid JSON (line " in line and ", column " in line


@pytest.mark.slow  # starts `dl` processes
def test_truncated_data_parquet_names_the_file(small_dataset, writable_copy, tmp_path):
    """The pool, whose workers open the file (the map loader reads it up front in the run process)."""
    loader = "pool"
    root = writable_copy(small_dataset)
    data = (root / DATA0).read_bytes()
    (root / DATA0).write_bytes(data[: len(data) // 2])
    proc = no_traceback(dl_subprocess("run", "--root", root, "--loader", loader, "--num-workers", "2", *FAST,
                                      "--out-dir", tmp_path / "out", cache_dir=tmp_path))
    assert proc.returncode == 1
    assert f"{DATA0} is not a readable parquet file" in proc.stdout.replace("\n", "")
    result = json.loads((tmp_path / "out" / f"{loader}-cpu-single-w2.json").read_text())
    assert result["status"] == "failed" and f"{DATA0} is not a readable parquet file" in result["error"]


# ------------------------------------------------------------------------------ bad options


@pytest.mark.slow  # starts `dl` processes
@pytest.mark.parametrize(("out_dir", "says"), [("afile", "is a file"), ("afile/sub", "lies under the file")])
def test_out_dir_that_cannot_be_a_folder(small_dataset, tmp_path, out_dir, says):
    (tmp_path / "afile").write_text("x")
    proc = no_traceback(dl_subprocess("run", "--root", small_dataset, "--out-dir", tmp_path / out_dir,
                                      cache_dir=tmp_path))
    assert proc.returncode == 2 and says in last_error_line(proc) and "--out-dir" in last_error_line(proc)


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_negative_workers_are_refused_before_any_work(small_dataset, tmp_path):
    proc = no_traceback(dl_subprocess("run", "--root", small_dataset, "--num-workers", "0,-1", "--out-dir",
                                      tmp_path / "out", cache_dir=tmp_path))
    assert proc.returncode == 2
    assert "Invalid value for --num-workers: -1 is negative" in last_error_line(proc)
    assert "prepare" not in proc.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("args", "says"), [
    (["--mode", "bogus"], "Invalid value for --mode: bogus: choose from single, sarm, chunk"),
    (["--episodes", "abc"], "--episodes: cannot read 'abc' in 'abc'"),
    (["--loader", "nope"],
     "unknown loader 'nope'; registered loaders: daft, lance, lerobot, lerobot_stream, map, pool, ray."),
])
@pytest.mark.slow  # starts `dl` processes
def test_errors_share_click_style_without_python_reprs(small_dataset, tmp_path, args, says):
    proc = no_traceback(dl_subprocess("run", "--root", small_dataset, *args, cache_dir=tmp_path))
    line = last_error_line(proc)
    assert proc.returncode == 2 and says in line
    assert "['" not in line and "('" not in line


# ------------------------------------------------------------------------------ run processes


@pytest.fixture(scope="module")
def boom_site(tmp_path_factory):
    site = tmp_path_factory.mktemp("boom")
    fake_distribution(site, "dl-boom", "0.1", {"boom": "dl_boom"})
    (site / "dl_boom.py").write_text(BOOM)
    return site


def run_with(site, root, tmp_path, *args):
    env = env_with(PYTHONPATH=str(site), DL_CACHE_DIR=str(tmp_path / "c"))
    return no_traceback(subprocess.run([str(DL), "run", "--root", str(root), *FAST, "--out-dir", str(tmp_path / "out"),
                                        *args], capture_output=True, text=True, timeout=300, env=env))


@pytest.mark.parametrize(("loader", "workers", "cause"), [
    ("boom_sample", "2", "ZeroDivisionError: division by zero"),
    ("boom_build", "0", "RuntimeError: the plugin broke while building"),
    ("killed", "0", "the run process ended (killed by signal SIGKILL) without writing a result"),
])
@pytest.mark.slow  # starts `dl` processes
def test_any_failure_in_a_run_process_is_a_failed_result_with_its_cause(boom_site, small_dataset, tmp_path, loader,
                                                                        workers, cause):
    proc = run_with(boom_site, small_dataset, tmp_path, "--loader", loader, "--num-workers", workers)
    assert proc.returncode == 1
    name = f"{loader}-cpu-single-w{workers}"
    result = json.loads((tmp_path / "out" / f"{name}.json").read_text())
    assert result["status"] == "failed" and cause in result["error"]
    assert f"{name} failed: " in proc.stdout and cause in proc.stdout.replace("\n", "")
    with open(tmp_path / "out" / "results.csv") as f:
        (row,) = list(csv.DictReader(f))
    assert row["status"] == "failed" and cause in row["error"]
    assert "1 JSON file(s) written" in proc.stdout


@pytest.mark.slow  # starts `dl` processes
def test_results_csv_covers_every_result_in_the_folder(small_dataset, tmp_path):
    for mode in ("single", "chunk"):
        proc = dl_subprocess("run", "--root", small_dataset, *FAST, "--num-workers", "0", "--mode", mode,
                             "--out-dir", tmp_path / "out", cache_dir=tmp_path)
        assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "out" / "results.csv") as f:
        names = [row["name"] for row in csv.DictReader(f)]
    assert names == ["map-cpu-chunk-w0", "map-cpu-single-w0"]
    assert "lists all 2 result(s)" in proc.stdout.replace("\n", "")


# ------------------------------------------------------------------------------ Ctrl-C and SIGTERM


def start_long_run(root, tmp_path):
    """`dl run` in its own process group (as a terminal's foreground job), once its run process and both
    DataLoader workers are up; returns (the process, its descendants)."""
    proc = subprocess.Popen([str(DL), "run", "--root", str(root), "--duration", "120", "--num-workers", "2",
                             "--out-dir", str(tmp_path / "out")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env=env_with(DL_CACHE_DIR=str(tmp_path / "c")))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        kids = psutil.Process(proc.pid).children(recursive=True)
        if len(kids) >= 3:  # the run process and its two DataLoader workers
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the run process and its workers did not start within 120 s")
    return proc, kids


def gone(processes, within_s=30.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in processes):
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
@pytest.mark.parametrize(("how", "code", "says"), [
    ("ctrl-c twice", 130, "Error: interrupted (Ctrl-C); runs in progress were stopped."),
    ("sigterm", 143, "Error: terminated (SIGTERM); runs in progress were stopped."),
])
def test_interrupting_dl_stops_its_runs_and_workers(small_dataset, tmp_path, how, code, says):
    proc, kids = start_long_run(small_dataset, tmp_path)
    if how == "ctrl-c twice":  # a single Ctrl-C at several points of a run: tests/test_signals.py
        os.killpg(proc.pid, signal.SIGINT)  # the terminal sends it to the whole foreground process group
        time.sleep(0.5)  # an impatient user: the second one must not cut the workers' shutdown short
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)  # only to dl itself: it must stop its run process and workers
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in out + err and err.strip().splitlines()[-1] == says, out + err
    assert gone(kids), "run processes or DataLoader workers outlived dl"
    assert not list((tmp_path / "out").glob("*.json")), "a result was written after dl stopped"


# ------------------------------------------------------------------------------ dl validate


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_validate_passes_a_good_dataset(small_dataset, tmp_path):
    proc = no_traceback(dl_subprocess("validate", small_dataset, cache_dir=tmp_path))
    assert proc.returncode == 0 and proc.stdout.strip().splitlines()[-1].startswith("ok: 6 episode(s)")


@pytest.mark.slow  # starts `dl` processes
def test_validate_finds_corrupt_files(small_dataset, writable_copy, tmp_path):
    root = writable_copy(small_dataset)
    data = (root / DATA0).read_bytes()
    (root / DATA0).write_bytes(data[: len(data) // 2])
    video = root / "videos" / "observation.images.cam1" / "chunk-000" / "file-001.mp4"
    video.write_bytes(b"not a video at all" * 10)
    info = subprocess.run([str(DL), "info", str(root)], capture_output=True, text=True, env=env_with(
        DL_CACHE_DIR=str(tmp_path)), timeout=120)
    assert "dl validate" in info.stdout  # dl info only checks presence, and says so
    proc = no_traceback(dl_subprocess("validate", root, cache_dir=tmp_path))
    assert proc.returncode == 1
    lines = proc.stdout.strip().splitlines()
    assert any(line.startswith("error: ") and f"{DATA0} is not a readable parquet file" in line and
               "[episodes 0-2]" in line for line in lines), proc.stdout
    assert any("cannot open video" in line and "file-001.mp4: Could not open input file" in line and
               "Invalid data found when processing input" in line and
               "its first bytes are b'not a video at a'" in line and "[episodes 3-5]" in line for line in lines)
    assert lines[-1].endswith("episodes without errors: --episodes (none)")
