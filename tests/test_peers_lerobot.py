"""The `lerobot` and `lerobot_stream` peer loaders in LeRobot 0.6.1's environment (scripts/setup_lerobot.sh; .ci/run
runs this file there with DL_REQUIRE_LEROBOT=1): `dl run --loader map,lerobot,lerobot-stream` on a dataset written by
LeRobot's own writer measures all three in one table, and each peer's values equal dl's."""

import json
import os
import subprocess
import sys

import pytest
from lerobot_datasets import write_lerobot_dataset

if os.environ.get("DL_REQUIRE_LEROBOT"):
    import lerobot.datasets.lerobot_dataset  # noqa: F401
else:
    pytest.importorskip("lerobot.datasets.lerobot_dataset", reason="needs LeRobot 0.6.1: scripts/setup_lerobot.sh")

pytestmark = pytest.mark.lerobot

QUICK = ["--duration", "2", "--warmup-batches", "1", "--single-proc-samples", "4", "--batch-size", "4"]


def test_lerobot_peers_run_beside_dl_and_serve_dl_values(tmp_path):
    root = write_lerobot_dataset(tmp_path / "written", [14, 11, 16, 12, 13])
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", "from dl.cli.main import main; main()", "run", "--root", str(root),
                           "--loader", "map,lerobot,lerobot-stream", "--out-dir", str(out), *QUICK],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "250"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = {json.loads(p.read_text())["config"]["loader"]: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert set(results) == {"map", "lerobot", "lerobot-stream"}
    for name in ("lerobot", "lerobot-stream"):
        peer = results[name]["peer"]
        assert results[name]["status"] == "ok" and results[name]["samples_per_s"] > 0
        assert peer["library"].startswith("lerobot 0.6") and peer["shuffled"]
        assert peer["values"] == "equal", peer
        assert {"action", "observation.state", "observation.images.cam0"} <= set(peer["values_max_abs_diff"])
    assert "peer" not in results["map"]
    assert "lerobot 0.6.1: torch RandomSampler" in done.stdout  # the table says how the peer orders its samples
