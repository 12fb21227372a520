"""Tests for dl.kits.video.decoder_cache.DecoderCache: LRU semantics and counters, counters summed across DataLoader
workers, open decoders never pickled nor reused across fork; and the cpu decoder's use of it."""

import json
import os
import pickle
import select
import signal
import time
from collections import OrderedDict

import pytest
import torch
import torch.utils.data

import dl
from dl.kits.video.decoder_cache import DecoderCache
from dl.testing.synthetic import read_frame_code


class Opener:
    """Records the keys it opened; each open returns a fresh, distinguishable object."""

    def __init__(self, prefix="decoder"):
        self.opened, self.prefix = [], prefix

    def __call__(self, key):
        def open_():
            self.opened.append(key)
            return f"{self.prefix}-{key}-{len(self.opened)}"
        return open_


def counts(hits, misses, evictions, open_, capacity):
    """`DecoderCache.stats()` of a cache without a byte bound whose decoders have no size estimate."""
    return {"hits": hits, "misses": misses, "evictions": evictions, "open": open_, "bytes": 0, "capacity": capacity,
            "max_bytes": None}


def simulate_lru(keys, capacity):
    """(hits, misses, evictions, open) of an LRU of `capacity` over `keys`."""
    lru, hits, misses, evictions = OrderedDict(), 0, 0, 0
    for key in keys:
        if key in lru:
            lru.move_to_end(key)
            hits += 1
        else:
            misses += 1
            lru[key] = True
            if len(lru) > capacity:
                lru.popitem(last=False)
                evictions += 1
    return hits, misses, evictions, len(lru)


# ----------------------------------------------------------------------------------------- LRU


def test_lru_scripted_sequence():
    cache = DecoderCache(2)
    opener = Opener()
    script = ["a", "b", "a", "c", "b", "a", "a", "d", "c"]
    got = [cache.get(k, opener(k)) for k in script]
    # a, b miss; a hits; c evicts b; b evicts a; a evicts c; a hits; d evicts b; c evicts a
    assert opener.opened == ["a", "b", "c", "b", "a", "d", "c"]
    assert got == ["decoder-a-1", "decoder-b-2", "decoder-a-1", "decoder-c-3", "decoder-b-4", "decoder-a-5",
                   "decoder-a-5", "decoder-d-6", "decoder-c-7"]
    assert cache.stats() == counts(2, 7, 5, 2, 2)
    assert list(cache.open_decoders()) == ["d", "c"]
    assert simulate_lru(script, 2) == (2, 7, 5, 2)


def test_hit_refreshes_recency():
    cache = DecoderCache(2)
    opener = Opener()
    for k in ["a", "b", "a", "c"]:  # the hit on a makes b the least recently used
        cache.get(k, opener(k))
    assert list(cache.open_decoders()) == ["a", "c"]
    cache.get("a", opener("a"))
    assert opener.opened == ["a", "b", "c"]
    assert cache.stats() == counts(2, 3, 1, 2, 2)


def test_capacity_one_and_counters_before_full():
    cache = DecoderCache(1)
    opener = Opener()
    cache.get("x", opener("x"))
    assert cache.stats() == counts(0, 1, 0, 1, 1)
    cache.get("x", opener("x"))
    cache.get("y", opener("y"))
    cache.get("x", opener("x"))
    assert opener.opened == ["x", "y", "x"]
    assert cache.stats() == counts(1, 3, 2, 1, 1)


@pytest.mark.parametrize("capacity", [0, -3])
def test_capacity_must_be_positive(capacity):
    with pytest.raises(ValueError, match="capacity"):
        DecoderCache(capacity)


def test_failed_open_is_not_cached():
    cache = DecoderCache(2)
    calls = []

    def broken():
        calls.append(1)
        raise RuntimeError("cannot open")

    for _ in range(2):
        with pytest.raises(RuntimeError):
            cache.get("bad", broken)
    assert len(calls) == 2 and "bad" not in cache.open_decoders()
    assert cache.get("bad", lambda: "ok") == "ok"
    assert cache.get("bad", broken) == "ok"


def test_reset_stats_and_clear():
    cache = DecoderCache(2)
    opener = Opener()
    for k in ["a", "b", "c", "c"]:
        cache.get(k, opener(k))
    assert cache.stats() == counts(1, 3, 1, 2, 2)
    cache.reset_stats()
    assert cache.stats() == counts(0, 0, 0, 2, 2)
    cache.get("c", opener("c"))  # decoders survive a reset
    assert opener.opened == ["a", "b", "c"]
    assert cache.stats()["hits"] == 1
    cache.clear()
    assert cache.stats() == counts(1, 0, 0, 0, 2)
    cache.get("c", opener("c"))
    assert opener.opened == ["a", "b", "c", "c"]
    assert cache.stats() == counts(1, 1, 0, 1, 2)


# ------------------------------------------------------------------------------ pickling and fork


def test_pickling_drops_open_decoders():
    cache = DecoderCache(3)
    opener = Opener()
    for k in ["a", "b", "a"]:
        cache.get(k, opener(k))
    copy = pickle.loads(pickle.dumps(cache))
    assert copy.capacity == 3
    assert len(copy.open_decoders()) == 0
    assert len(cache.open_decoders()) == 2  # the original keeps its decoders
    assert copy.stats()["hits"] == 1 and copy.stats()["misses"] == 2
    assert copy.get("a", opener("a")) == "decoder-a-3"  # reopened, not the parent's
    assert cache.get("a", opener("a")) == "decoder-a-1"


def test_dataset_with_open_decoders_pickles(small_dataset):
    ds = dl.make_dataset(str(small_dataset))
    assert read_frame_code(ds[0]["observation.images.cam0"]) == (0, 0)
    assert len(ds.decoder.cache.open_decoders()) == 2  # torchcodec decoders are open
    copy = pickle.loads(pickle.dumps(ds))
    assert len(copy.decoder.cache.open_decoders()) == 0
    sample = copy[len(copy) - 1]
    assert read_frame_code(sample["observation.images.cam1"]) == (len(copy) - 1, 1)


def run_in_fork(child, timeout_s=60.0):
    """Run `child()` (returning a JSON-able value) in a forked process; return its value. The child runs
    torch single-threaded, as DataLoader workers do (OpenMP's pool does not survive fork); a child that
    hangs anyway is killed after `timeout_s` and the test fails."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            os.close(r)
            torch.set_num_threads(1)
            os.write(w, json.dumps(child()).encode())
            code = 0
        except BaseException as exc:  # report, never return into pytest
            os.write(w, json.dumps({"error": repr(exc)}).encode())
        finally:
            os._exit(code)
    os.close(w)
    chunks, deadline = [], time.monotonic() + timeout_s
    with os.fdopen(r, "rb") as f:
        while True:
            ready, _, _ = select.select([f], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail(f"forked child hung for {timeout_s} s")
            chunk = os.read(f.fileno(), 65536)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    data = b"".join(chunks).decode()
    assert os.waitstatus_to_exitcode(status) == 0, data
    return json.loads(data)


def test_forked_child_does_not_reuse_parent_decoders():
    cache = DecoderCache(2)
    parent = Opener()
    assert cache.get("a", parent("a")) == "decoder-a-1"

    def child():
        opener = Opener("child")
        first = cache.get("a", opener("a"))
        second = cache.get("a", opener("a"))
        return {"opened": opener.opened, "first": first, "second": second, "parent_calls": parent.opened}

    out = run_in_fork(child)
    assert out["opened"] == ["a"]  # the child opened its own decoder once, then hit it
    assert out["first"] == out["second"] == "child-a-1"  # the child's own decoder, not the parent's
    assert out["parent_calls"] == ["a"]  # the parent's opener was not called in the child
    # the parent still has its own decoder
    assert cache.get("a", parent("a")) == "decoder-a-1" and parent.opened == ["a"]
    # counters live in shared memory: the child's miss and hit are visible here
    assert cache.stats() == counts(2, 2, 0, 1, 2)


def test_forked_child_reopens_real_video_decoders(small_dataset):
    ds = dl.make_dataset(str(small_dataset), decoder_options={"cache_size": 2})
    cache = ds.decoder.cache
    ds[0]
    parent_decoders = cache.open_decoders()
    # the loader probed both files when it was built, through the cache: ds[0] reused those decoders
    assert len(parent_decoders) == 2 and cache.stats()["misses"] == 2 and cache.stats()["hits"] == 2

    def child():
        sample = ds[1]
        reused = [k for k, v in cache.open_decoders().items() if parent_decoders.get(k) is v]
        return {"reused": len(reused), "open": len(cache.open_decoders()),
                "code": list(read_frame_code(sample["observation.images.cam1"]))}

    out = run_in_fork(child)
    assert out == {"reused": 0, "open": 2, "code": [1, 1]}
    assert cache.stats()["misses"] == 4 and cache.stats()["hits"] == 2  # the child opened both again
    ds[2]
    assert cache.open_decoders() == parent_decoders
    assert cache.stats()["hits"] == 4 and cache.stats()["misses"] == 4


# ---------------------------------------------------------------------------- DataLoader workers


def test_counters_summed_across_dataloader_workers(dataset_factory):
    root = dataset_factory(episodes=4, frames_per_episode=(10, 16), episodes_per_file=1)
    ds = dl.make_dataset(str(root), decoder_options={"cache_size": 2}, image_dtype="uint8")
    cameras = ds.meta.video_keys
    files = {ep.videos[k].path for ep in ds.episodes for k in cameras}
    assert len(files) == 8
    batch_size, workers = 6, 2
    loader = torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=False, num_workers=workers)
    seen = []
    for batch in loader:
        seen += batch["index"].tolist()
        for j, index in enumerate(batch["index"].tolist()):
            assert read_frame_code(batch[cameras[1]][j]) == (index, 1)
    assert seen == list(range(len(ds)))
    stats = ds.decoder.cache.stats()
    assert stats["misses"] >= len(files)
    # exact: batch b goes to worker b % 2, each worker keeps its own LRU of 2 and its own counter slot; the first
    # time a worker decodes from a file it probes the file through the cache (a miss), then decodes (a hit), except
    # the first episode's files, which the main process probed before the workers started
    expected = [0, 2, 0]  # the main process probed the first episode's two files when the loader was built
    for w in range(workers):
        keys = [ds.locate(i)[0] * 10 + c  # (episode position, camera) identifies the file here
                for b in range(w, -(-len(ds) // batch_size), workers)
                for i in range(b * batch_size, min((b + 1) * batch_size, len(ds)))
                for c in range(len(cameras))]
        probed = [k for i, k in enumerate(keys) for _ in range(1 + (k not in keys[:i] and k // 10 != 0))]
        hits, misses, evictions, _ = simulate_lru(probed, 2)
        assert ds.decoder.cache.counters.values[1 + w, :3].tolist() == [hits, misses, evictions], w
        expected = [a + b for a, b in zip(expected, (hits, misses, evictions), strict=True)]
    assert [stats["hits"], stats["misses"], stats["evictions"]] == expected
    assert ds.decoder.cache.counters.values[0, :3].tolist() == [0, 2, 0]  # the main process decoded nothing
    ds.decoder.cache.reset_stats()
    assert [ds.decoder.cache.stats()[k] for k in ("hits", "misses", "evictions")] == [0, 0, 0]


def test_default_cache_holds_every_file_of_a_worker(dataset_factory):
    root = dataset_factory(episodes=4, frames_per_episode=(10, 16), episodes_per_file=1)
    ds = dl.make_dataset(str(root))
    assert ds.decoder.cache.capacity == 64
    loader = torch.utils.data.DataLoader(ds, batch_size=4, shuffle=True, num_workers=2,
                                         generator=torch.Generator().manual_seed(0))
    n = sum(len(b["index"]) for b in loader)
    stats = ds.decoder.cache.stats()
    assert n == len(ds)
    assert stats["evictions"] == 0
    assert 10 <= stats["misses"] <= 18  # each of 8 files opened at most once per worker, 2 probed in the main process
    # each camera of each sample looked up once, plus at most one probe per file opened in each process
    assert 2 * len(ds) < stats["hits"] + stats["misses"] <= 2 * len(ds) + stats["misses"]


def test_the_host_keeps_open_what_the_pool_reads_in_turn(dataset_factory):
    root = str(dataset_factory(episodes=12, frames_per_episode=(10, 12), episodes_per_file=1))
    built = dl.assemble(root, loader="pool", loader_options={"episode_pool_size": 40})  # 12 episodes x 2 cameras
    assert built.decoder.cache.capacity == 64 and built.decoder_cache["capacity"] == 64
    assert "loader pool reads 24 video files in turn" in built.decoder_cache["capacity_from"]


def test_the_host_raises_a_default_cache_to_what_the_loader_reads(dataset_factory, monkeypatch):
    from dl.host import reconcile
    from dl.host.assembly import build_loader
    from dl.plugins.cpu_decoder import CpuDecoder

    monkeypatch.setattr(reconcile, "MAX_OPEN_FILES", 20)
    root = str(dataset_factory(episodes=12, frames_per_episode=(10, 12), episodes_per_file=1))
    meta = dl.assemble(root).meta
    small = CpuDecoder()
    small.cache.resize(4)  # a decoder whose default holds fewer files than the pool reads in turn
    built = build_loader(meta, "pool", small, loader_options={"episode_pool_size": 8})
    assert built.decoder.cache.capacity == 16
    assert built.decoder_cache["capacity_from"].startswith("raised by the host from decoder cpu's default 4: loader "
                                                           "pool reads 16 video files in turn per consumer")
    built = build_loader(meta, "pool", small, loader_options={"episode_pool_size": 12})
    assert built.decoder.cache.capacity == 20 and built.decoder_cache["capacity_from"].endswith("at most 20")


def test_a_cache_size_the_user_chose_is_kept_with_a_warning_naming_both(dataset_factory):
    root = str(dataset_factory(episodes=12, frames_per_episode=(10, 12), episodes_per_file=1))
    with pytest.warns(UserWarning, match=r"loader pool reads 16 video files in turn per consumer \(episode_pool_size "
                                         r"8: 8 open episodes x 2 camera\(s\)\), but decoder cpu keeps 8 open \(its "
                                         r"cache_size, as given\).*cache_size=16"):
        built = dl.assemble(root, loader="pool", decoder_options={"cache_size": 8},
                            loader_options={"episode_pool_size": 8})
    assert built.decoder.cache.capacity == 8
    assert built.decoder_cache == {"capacity": 8, "capacity_from": "decoder cpu's cache_size as given; loader pool "
                                   "reads 16 video files in turn per consumer (episode_pool_size 8: 8 open episodes x "
                                   "2 camera(s))"}
    assert dl.assemble(root, loader="map", decoder_options={"cache_size": 8}).decoder_cache == {}
