"""The `lance`, `ray` and `daft` peer loaders, each in its own environment (scripts/setup_peers.sh, under
DL_PEERS_DIR): `dl run` from dl's environment starts each peer's runs there, measures them beside dl's map loader, and
each peer's values equal dl's. Slow; skipped where the peers' environments are not built."""

import json
import os
import subprocess
import sys

import pytest

from dl.plugins.peers.environments import peers_dir

pytestmark = pytest.mark.slow
QUICK = ["--duration", "2", "--warmup-batches", "1", "--single-proc-samples", "4", "--batch-size", "4"]


def _needs(venv: str):
    if not (peers_dir() / venv / "bin" / "python").is_file():
        pytest.skip(f"no {venv} environment in {peers_dir()}: scripts/setup_peers.sh builds it")


def dl_run(*args, cwd):
    return subprocess.run([sys.executable, "-c", "from dl.cli.main import main; main()", "run", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "250"})


@pytest.mark.parametrize("loader", ["lance", "ray", "daft"])
def test_a_peer_in_its_own_environment_runs_beside_dl_with_dl_values(loader, small_dataset, tmp_path):
    _needs(loader)
    out = tmp_path / "out"
    done = dl_run("--root", small_dataset, "--loader", f"map,{loader}", "--out-dir", out, *QUICK, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((out / f"{loader}-cpu-single-w2.json").read_text())
    assert result["status"] == "ok" and result["samples_per_s"] > 0
    assert result["environment"]["python"].startswith("3.12" if loader != "daft" else "3.11")  # the peer's venv
    assert result["peer"]["values"] == "equal", result["peer"]
    assert result["peer"]["shuffled"] is (loader != "daft")


def test_daft_refuses_delta_timestamps_in_one_line(small_dataset, tmp_path):
    _needs("daft")
    done = dl_run("--root", small_dataset, "--loader", "daft", "--mode", "sarm", "--out-dir", tmp_path / "out",
                  *QUICK, cwd=tmp_path)
    assert done.returncode != 0
    assert "loader daft reads single frames: Daft's LeRobot reader has no delta_timestamps" in done.stdout
