"""The prefetch cache on storage several nodes share: run folders named by host and process, so a process
removes only its own host's crashed folders, never another node's live downloads (two "hosts", as two
processes with different DL_HOSTNAME, on one folder); and where the folders go by default (node-local
storage first) or when `cache_dir` / `--cache-dir` says."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dl.kits.paths import cache_dir
from dl.kits.remote.run_folders import default_base, host_name

HOLDER = """
import sys
from pathlib import Path
from dl.kits.remote.file_cache import Piece, PrefetchCache
cache = PrefetchCache(Path(sys.argv[1]), 100, lambda rel, start, end, out: out.write(b"x" * (end - start)), threads=1)
cache.admit(0, [Piece("video.mp4", 0, 10)])
print(cache.locate("video.mp4", 0).path, flush=True)
sys.stdin.readline()  # holds its download until told to stop
cache.close()
"""


class Holder:
    """A process on host `host` that downloads one file into a run folder of `base` and holds it."""

    def __init__(self, base: Path, host: str, env: dict):
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(base)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env={**env, "DL_HOSTNAME": host})
        self.file = Path(self.proc.stdout.readline().strip())

    def stop(self) -> None:
        self.proc.communicate("stop\n", timeout=30)
        assert self.proc.returncode == 0


def crashed(base: Path, host: str) -> Path:
    """A run folder of `host` whose process is gone (no pid reaches 999999999), with a file in it."""
    folder = base / f"run-{host}-999999999-1"
    folder.mkdir(parents=True)
    (folder / "part.mp4").write_bytes(b"left over")
    return folder


def test_two_hosts_on_one_cache_folder_keep_each_others_files(tmp_path):
    env = dict(os.environ)
    shared = tmp_path / "shared-home"
    a_crashed, b_crashed = crashed(shared, "node-a"), crashed(shared, "node-b")
    a = Holder(shared, "node-a", env)
    try:
        assert a.file.parent.name.startswith(f"run-node-a-{a.proc.pid}-") and a.file.read_bytes() == b"x" * 10
        assert not a_crashed.exists(), "node-a removes its own crashed folder"
        assert b_crashed.exists(), "node-a cannot know node-b's pids: it leaves node-b's folder alone"
        b = Holder(shared, "node-b", env)
        try:
            assert b.file.parent.name.startswith(f"run-node-b-{b.proc.pid}-")
            assert not b_crashed.exists(), "node-b removes its own crashed folder"
            assert a.file.read_bytes() == b"x" * 10, "node-b deleted node-a's live download"
        finally:
            b.stop()
        assert not b.file.parent.exists() and a.file.read_bytes() == b"x" * 10
    finally:
        a.stop()
    assert not a.file.parent.exists()
    assert sorted(p.name for p in shared.iterdir()) == []


def test_a_host_name_with_dashes_is_told_from_a_longer_one(tmp_path, monkeypatch):
    other = crashed(tmp_path, "node-a-2")  # starts like this host's "node-a" folders
    monkeypatch.setenv("DL_HOSTNAME", "node-a")
    from dl.kits.remote.run_folders import run_dir

    mine = run_dir(tmp_path)
    assert other.exists() and mine.name.startswith("run-node-a-") and host_name() == "node-a"


@pytest.mark.parametrize(("slurm", "tmp", "expected"), [("slurm", "tmp", "slurm"), (None, "tmp", "tmp"),
                                                         (None, None, "cache")])
def test_the_cache_is_node_local_by_default(tmp_path, monkeypatch, slurm, tmp, expected):
    for name, value in (("SLURM_TMPDIR", slurm), ("TMPDIR", tmp)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, str(tmp_path / value))
    monkeypatch.setenv("DL_CACHE_DIR", str(tmp_path / "cache"))
    where = {"slurm": tmp_path / "slurm" / "dl-remote", "tmp": tmp_path / "tmp" / "dl-remote",
             "cache": cache_dir("remote")}
    assert default_base() == where[expected]


def test_cache_dir_is_refused_for_a_source_without_a_cache(tmp_path):
    from cli_helpers import invoke

    result = invoke("run", "--root", str(tmp_path), "--cache-dir", str(tmp_path / "x"), "--out-dir", tmp_path / "o")
    assert result.exit_code == 2 and "does not take option cache_dir" in result.output
