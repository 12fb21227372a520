"""The peer loaders (dl.plugins.peers) without their libraries: registered through the `dl` entry points, refused in
one line naming what to install, found in the peers' environments; `dl run` with several loaders; and the value
comparison every peer run makes (dl.bench.peer_values). With the libraries: tests/test_peers_lerobot.py (LeRobot's
environment) and tests/test_peers_installed.py (the peers' environments, slow)."""

import json
import os
import subprocess
import sys

import pytest
import torch

from dl.bench.peer_values import peer_values
from dl.contracts.config import LoaderConfig
from dl.contracts.errors import PluginError
from dl.host.assembly import build_loader, open_dataset
from dl.host.manager import get_plugins
from dl.plugins.peers.environments import interpreter_for
from dl.plugins.peers.lance import LancePeer
from dl.plugins.peers.lerobot import LeRobotStreamPeer

PEERS = ("daft", "lance", "lerobot", "lerobot_stream", "ray")
QUICK = ["--duration", "1", "--warmup-batches", "1", "--single-proc-samples", "4", "--batch-size", "4"]


def dl_run(*args, cwd, env=None):
    cmd = [sys.executable, "-c", "from dl.cli.main import main; main()", "run", *map(str, args)]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


def test_the_peers_register_through_the_dl_entry_points():
    registry = get_plugins().registry
    entries = {e.name: e for e in registry.entries() if e.kind == "loader"}
    assert set(PEERS) <= set(entries)
    assert all(entries[name].module == "dl.plugins.peers" for name in PEERS)
    assert registry.get("loader", "lerobot-stream").name == "lerobot_stream"  # the name users type


def test_a_peer_installed_nowhere_is_refused_in_one_line_naming_the_extra(tmp_path, monkeypatch):
    monkeypatch.setenv("DL_PEERS_DIR", str(tmp_path))
    with pytest.raises(PluginError) as raised:
        interpreter_for("lance", "lerobot_lancedb", "lance", "lance")
    message = str(raised.value)
    assert "\n" not in message and "pip install 'dl[lance]'" in message and "scripts/setup_peers.sh" in message
    assert str(tmp_path) in message


def test_a_peer_runs_in_its_environment_when_it_is_not_installed_here(tmp_path, monkeypatch):
    venv = tmp_path / "ray" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    monkeypatch.setenv("DL_PEERS_DIR", str(tmp_path))
    assert interpreter_for("ray", "ray", "ray", "ray") == str(venv / "python")
    assert interpreter_for("ray", "torch", "ray", "ray") is None  # importable here: this interpreter
    with pytest.raises(PluginError, match="python=.* is not a file"):
        interpreter_for("ray", "ray", "ray", "ray", python=str(tmp_path / "nope"))


def test_building_a_peer_without_its_library_names_the_extra(small_dataset):
    meta = open_dataset(str(small_dataset))
    decoder = get_plugins().registry.create("decoder", "cpu")
    with pytest.raises(PluginError, match=r"loader lance needs lerobot_lancedb .*pip install 'dl\[lance\]'"):
        LancePeer(meta, decoder, LoaderConfig())


def test_dl_run_refuses_a_missing_peer_before_any_run(small_dataset, tmp_path):
    out = tmp_path / "out"
    done = dl_run("--root", small_dataset, "--loader", "map,lance", "--out-dir", out, *QUICK, cwd=tmp_path,
                  env={"DL_PEERS_DIR": str(tmp_path / "none")})
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if "lerobot_lancedb" in line]
    assert len(lines) == 1 and "scripts/setup_peers.sh" in lines[0], done.stderr
    assert not out.exists() or not list(out.glob("*.json"))


def test_several_loaders_run_side_by_side_each_with_its_own_options(small_dataset, tmp_path):
    out = tmp_path / "out"
    done = dl_run("--root", small_dataset, "--loader", "map,pool", "--loader-option", "episode_pool_size=2",
                  "--decode-budget", "1M", "--out-dir", out, *QUICK, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    by_loader = {}
    for path in out.glob("*.json"):
        result = json.loads(path.read_text())
        by_loader[result["config"]["loader"]] = result
    assert set(by_loader) == {"map", "pool"}
    assert by_loader["map"]["config"]["loader_options"] == {}  # neither option is the map loader's
    assert by_loader["pool"]["config"]["loader_options"] == {"episode_pool_size": 2, "decode_budget": "1M"}
    refused = dl_run("--root", small_dataset, "--loader", "map,pool", "--loader-option", "bogus=1",
                     "--out-dir", out, *QUICK, cwd=tmp_path)
    assert refused.returncode != 0 and "none of the loaders map, pool takes bogus" in refused.stderr


class _DlAsPeer(torch.utils.data.Dataset):
    """dl's own map loader standing in for a peer's reader; `shift` serves each index the frames of the next sample
    (a peer off by one frame)."""

    library, order, shuffled = "dl map", "as dl's", True

    def __init__(self, root, shift: bool = False):
        self.inner = build_loader(open_dataset(str(root)), "map", "cpu").loader
        self.meta, self.decoder, self.config = self.inner.meta, self.inner.decoder, self.inner.config
        self.shift = shift

    def __len__(self):
        return len(self.inner) - 1

    def __getitem__(self, i):
        sample = dict(self.inner[i])
        if self.shift:
            following = self.inner[i + 1]
            sample.update({k: following[k] for k in self.meta.camera_keys})
        return sample


def test_peer_values_equal_for_the_same_samples_and_differ_for_shifted_frames(small_dataset):
    cameras = _DlAsPeer(small_dataset).meta.camera_keys
    same = peer_values(_DlAsPeer(small_dataset), seed=0)
    assert same["values"] == "equal", same
    assert set(same["values_max_abs_diff"]) >= {"observation.state", "action", *cameras}
    shifted = peer_values(_DlAsPeer(small_dataset, shift=True), seed=0)
    assert shifted["values"] == "differ", shifted
    assert all(key in shifted["values_line"] for key in cameras) and "action" not in shifted["values_line"]


def test_the_streaming_peer_refuses_a_dataset_it_would_read_other_frames_of(small_dataset):
    # 3 episodes per video file: the second file's episodes start at 0 s in it, not at their index / fps
    meta = open_dataset(str(small_dataset))
    decoder = get_plugins().registry.create("decoder", "cpu")
    with pytest.raises(PluginError) as raised:
        LeRobotStreamPeer(meta, decoder, LoaderConfig())
    message = str(raised.value)
    assert "\n" not in message and "episode 3's" in message and "--loader lerobot" in message
