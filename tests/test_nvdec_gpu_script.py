"""benchmarks/nvdec_gpu.py, the one script that measures NVDEC on a GPU machine, as far as it runs here: without a
GPU it says why and exits 2 before doing anything; --datasets-only makes its datasets with `dl transcode`, and
--cpu-only measures the CPU half on them, so the script itself is known to work before a GPU machine runs it."""

import json
import subprocess
import sys

import pytest
import torch

from dl.plugins.nvdec_decoder import cuda_problems

SCRIPT = __import__("pathlib").Path(__file__).resolve().parents[1] / "benchmarks" / "nvdec_gpu.py"


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the script runs in full there")
def test_without_a_gpu_it_says_why_and_stops(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--work", str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("no GPU that nvdec can use here: ") and "--cpu-only" in done.stderr
    assert all(problem in done.stderr for problem in cuda_problems())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the script runs in full there")
def test_the_cpu_half_runs_end_to_end(dataset_factory, tmp_path):
    root = dataset_factory(codec="av1", gop=2, episodes=4, episodes_per_file=2)
    out = tmp_path / "report.json"
    made = subprocess.run([sys.executable, str(SCRIPT), "--datasets-only", "--root", str(root), "--work",
                           str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert made.returncode == 0 and not out.exists(), made.stdout[-3000:] + made.stderr[-3000:]
    assert f"h264: {tmp_path / (root.name + '-h264-g2')}" in made.stdout  # the run below reuses them
    done = subprocess.run([sys.executable, str(SCRIPT), "--cpu-only", "--root", str(root), "--work", str(tmp_path),
                           "--seconds", "0.3", "--duration", "1", "--run-codecs", "h264", "--out", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["gpu_problems"] and "tests" not in report and "saturation" not in report
    assert "dl run hevc cpu" not in report  # --run-codecs h264
    for codec in ("h264", "hevc", "av1"):
        rates = report["decode"][codec]["cpu"]
        assert rates["random_frames_per_s"] > 0 and rates["sequential_frames_per_s"] > 0, rates
    runs = report["dl run h264 cpu"]
    assert {runs[name]["status"] for name in ("map-cpu-single-w0", "pool-cpu-single-w2")} == {"ok"}
    assert "| h264 | cpu |" in done.stdout
