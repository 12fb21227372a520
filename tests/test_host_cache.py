"""The host's block cache: one folder per host under a base several nodes may share (two "hosts", as two
`DL_HOSTNAME`s on one folder: each evicts and cleans only its own), least recently used blocks evicted past the
limit, temporary files of dead writers cleaned, one download of a block while other readers wait on its lock, and
where the cache goes by default (node-local storage first) or when `cache_dir` says."""

import os
import threading
from pathlib import Path

import pytest

from dl.kits.lru_folder import STALE_TEMP_S
from dl.kits.paths import cache_dir
from dl.kits.remote.host_cache import BLOCK_BYTES, HostCache, default_base, host_folder
from dl.plugins.remote.bucket import bucket_source


def aged(path: Path, age_s: float) -> None:
    """Mark `path` as last used `age_s` seconds ago."""
    when = os.stat(path).st_mtime - age_s
    os.utime(path, (when, when))


def blocks(cache: HostCache) -> list[str]:
    return sorted(p.name for p in cache.dir.iterdir() if p.suffix == ".blk")


def test_two_hosts_on_one_cache_folder_keep_each_others_files(tmp_path, monkeypatch):
    shared = tmp_path / "shared-home"
    caches = {}
    for host in ("node-b", "node-a"):
        monkeypatch.setenv("DL_HOSTNAME", host)
        caches[host] = HostCache(host_folder(str(shared)), limit_bytes=25)
        if host == "node-b":
            caches[host].save("f", 0, b"x" * 10)
        stale = caches[host].dir / f"f.9.blk.{host}.tmp"  # a writer that died
        stale.write_bytes(b"part")
        aged(stale, STALE_TEMP_S + 1)
    for block in range(3):  # past node-a's limit: its least recently used block goes, and its stale file
        caches["node-a"].save("f", block, b"x" * 10)
        aged(Path(caches["node-a"].path("f", block)), 100 - block)
    assert sorted(p.name for p in shared.iterdir()) == ["host-node-a", "host-node-b"]
    assert blocks(caches["node-a"]) == ["f.1.blk", "f.2.blk"]
    assert not (caches["node-a"].dir / "f.9.blk.node-a.tmp").exists()
    assert sorted(p.name for p in caches["node-b"].dir.iterdir()) == ["f.0.blk", "f.9.blk.node-b.tmp"], (
        "node-a deleted node-b's files")


def test_eviction_goes_least_recently_used_first(tmp_path):
    cache = HostCache(tmp_path / "host-x", limit_bytes=30)
    for block in range(3):
        cache.save("f", block, b"y" * 10)
        aged(Path(cache.path("f", block)), 100 - block)  # 0 oldest
    fresh = HostCache(cache.dir, limit_bytes=30)  # another process: it marks what it reads
    assert fresh.get("f", 0) is not None  # used now
    cache.save("f", 3, b"y" * 10)  # over the limit: the least recently used goes
    assert blocks(cache) == ["f.0.blk", "f.2.blk", "f.3.blk"]
    assert cache.get("f", 1) is None


def test_a_fresh_temporary_file_stays(tmp_path):
    cache = HostCache(tmp_path / "host-x", limit_bytes=8)
    writing = cache.dir / "f.0.blk.host-123-abc.tmp"  # a process writing it now
    writing.write_bytes(b"part")
    cache.save("f", 1, b"z")  # evicts (every limit / 8 bytes written)
    assert writing.exists()


def test_one_thread_downloads_a_block_while_the_others_wait(dataset_factory, tmp_path):
    root = dataset_factory(frames_per_episode=(60, 60), width=320, height=240, texture=44)
    source = bucket_source(f"file://{root}", cache_dir=str(tmp_path / "cache"))
    rel = next(rel for rel, size in source.list_files("videos").items() if size > 2 * BLOCK_BYTES)
    paths = []
    threads = [threading.Thread(target=lambda: paths.append(source.block_path(rel, 1))) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(set(paths)) == 1 and len(paths) == 6
    assert Path(paths[0]).read_bytes() == (root / rel).read_bytes()[BLOCK_BYTES:2 * BLOCK_BYTES]
    assert source.figures()["bytes_fetched"] == BLOCK_BYTES and source.figures()["ranges_prefetched"] == 1


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
