"""dl.kits.remote.file_cache.PrefetchCache: reference counting of files shared by episodes, the byte limit (waiting in
line, reads of waiting files go remote, one episode over the limit is an error), failed downloads, and the
run folder's clean-up on close and after a crash."""

import os
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dl.contracts.errors import SourceFileNotFoundError
from dl.kits.remote.file_cache import CacheLimitError, PrefetchCache, host_name


class Remote:
    """A stand-in remote store: file contents by name; `gate` holds downloads until set."""

    def __init__(self, files: dict[str, bytes]):
        self.files, self.fetched = files, []
        self.gate = threading.Event()
        self.gate.set()

    def download(self, rel, size, out):
        self.gate.wait(timeout=30)
        if rel not in self.files:
            raise SourceFileNotFoundError(f"remote://{rel} does not exist.")
        self.fetched.append(rel)
        out.write(self.files[rel])


def sizes(remote: Remote, *names: str) -> dict[str, int]:
    return {n: len(remote.files[n]) for n in names}


def cache_files(cache: PrefetchCache) -> list[str]:
    return sorted(os.listdir(cache.dir))


def test_shared_files_stay_until_the_last_episode_leaves(tmp_path):
    remote = Remote({"a": b"1" * 10, "shared": b"2" * 20, "b": b"3" * 30})
    cache = PrefetchCache(tmp_path, 1000, remote.download, threads=2)
    cache.admit(0, sizes(remote, "a", "shared"))
    cache.admit(1, sizes(remote, "shared", "b"))
    paths = {rel: cache.local_path(rel) for rel in ("a", "shared", "b")}
    assert {rel: open(p, "rb").read() for rel, p in paths.items()} == remote.files
    assert sorted(remote.fetched) == ["a", "b", "shared"]  # the shared file once
    cache.release(0)
    assert not os.path.exists(paths["a"]) and os.path.exists(paths["shared"])
    cache.release(1)
    assert cache_files(cache) == [] and cache.reserved == 0
    cache.close()
    assert not cache.dir.exists()


def test_files_wait_for_room_and_reads_of_waiting_files_go_remote(tmp_path):
    remote = Remote({"a": b"1" * 60, "b": b"2" * 60})
    peaks = []
    cache = PrefetchCache(tmp_path, 100, remote.download, threads=1, on_reserved=peaks.append)
    cache.admit(0, sizes(remote, "a"))
    cache.admit(1, sizes(remote, "b"))  # does not block: b waits for room
    assert cache.local_path("a") is not None
    assert cache.local_path("b") is None  # the reader streams it instead of waiting (no deadlock)
    cache.release(0)
    assert open(cache.local_path("b"), "rb").read() == remote.files["b"]
    assert max(peaks) <= 100
    cache.close()


def test_one_episode_larger_than_the_limit_is_an_error(tmp_path):
    remote = Remote({"a": b"1" * 60, "b": b"2" * 60})
    cache = PrefetchCache(tmp_path, 100, remote.download)
    with pytest.raises(CacheLimitError, match=r"episode 7 needs 0\.0 MB.*a, b.*cache_bytes"):
        cache.admit(7, sizes(remote, "a", "b"))


def test_settle_refuses_to_wait_for_room_nobody_frees(tmp_path):
    remote = Remote({"a": b"1" * 60, "b": b"2" * 60})
    cache = PrefetchCache(tmp_path, 100, remote.download)
    cache.admit(0, sizes(remote, "a"))
    cache.admit(1, sizes(remote, "b"))
    with pytest.raises(CacheLimitError, match="more than the local cache"):
        cache.settle()
    cache.close()


def test_a_failed_download_fails_every_reader(tmp_path):
    remote = Remote({"a": b"1"})
    cache = PrefetchCache(tmp_path, 100, remote.download)
    cache.admit(0, {"gone.mp4": 5})
    for _ in range(2):
        with pytest.raises(SourceFileNotFoundError, match="gone.mp4"):
            cache.local_path("gone.mp4")
    with pytest.raises(SourceFileNotFoundError):
        cache.settle()
    cache.release(0)
    assert cache.reserved == 0
    cache.close()


def test_a_reader_takes_over_a_queued_download(tmp_path):
    remote = Remote({"a": b"1" * 10, "b": b"2" * 10})
    a_started, b_read = threading.Event(), threading.Event()

    def download(rel, size, out):
        if rel == "a":  # holds the only download thread until "b" has been read
            a_started.set()
            b_read.wait(timeout=30)
        remote.download(rel, size, out)

    cache = PrefetchCache(tmp_path, 100, download, threads=1)
    cache.admit(0, sizes(remote, "a", "b"))
    assert a_started.wait(timeout=30)  # "b" is queued behind it
    assert open(cache.local_path("b"), "rb").read() == remote.files["b"]
    assert remote.fetched == ["b"]  # downloaded by this thread while "a" still held the other one
    b_read.set()
    cache.close()


def test_release_during_download_deletes_the_file_after_it(tmp_path):
    remote = Remote({"a": b"1" * 10})
    remote.gate.clear()
    started, freed = threading.Event(), threading.Event()
    original = remote.download

    def download(rel, size, out):
        started.set()
        original(rel, size, out)

    cache = PrefetchCache(tmp_path, 100, download, threads=1, on_reserved=lambda n: n == 0 and freed.set())
    cache.admit(0, sizes(remote, "a"))
    assert started.wait(timeout=30)  # the download is in flight
    cache.release(0)
    assert cache.reserved == 10  # still reserved: the bytes are being written
    remote.gate.set()
    assert freed.wait(timeout=30)  # the download finished and cleaned up after itself
    assert cache_files(cache) == [] and remote.fetched == ["a"]
    cache.close()


def test_a_file_readmitted_while_its_old_download_runs_keeps_its_new_copy(tmp_path):
    remote = Remote({"a": b"1" * 10})
    first_started, first_gate = threading.Event(), threading.Event()
    original = remote.download

    def download(rel, size, out):
        if not first_started.is_set():  # the first download waits until the second one is done
            first_started.set()
            assert first_gate.wait(timeout=30)
        original(rel, size, out)

    reserved, first_ended = [], threading.Event()

    def on_reserved(n):  # 10 for the first copy, 20 with the second, 10 once the first download has ended
        reserved.append(n)
        if reserved == [10, 20, 10]:
            first_ended.set()

    cache = PrefetchCache(tmp_path, 100, download, threads=1, on_reserved=on_reserved)
    cache.admit(0, sizes(remote, "a"))
    assert first_started.wait(timeout=30)
    cache.release(0)  # the first download is still running
    cache.admit(1, sizes(remote, "a"))
    path = cache.local_path("a")  # this thread takes the second download over
    first_gate.set()
    assert first_ended.wait(timeout=30)  # the first download ended and deleted its own copy, not the second one
    assert open(path, "rb").read() == remote.files["a"]
    assert remote.fetched == ["a", "a"] and cache.reserved == 10
    cache.close()


def test_run_folders_of_dead_processes_are_removed(tmp_path):
    stale = tmp_path / f"run-{host_name()}-999999999-1"
    stale.mkdir()
    (stale / "leftover.mp4").write_bytes(b"x")
    remote = Remote({"a": b"1"})
    cache = PrefetchCache(tmp_path, 100, remote.download)
    cache.admit(0, sizes(remote, "a"))
    assert not stale.exists() and cache.dir.exists()
    cache.close()


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(ops=st.lists(st.tuples(st.booleans(), st.integers(0, 5), st.sets(st.sampled_from("abcdef"), min_size=1,
                                                                           max_size=3)), max_size=25))
def test_reservations_never_exceed_the_limit_and_all_go(tmp_path_factory, ops):
    remote = Remote({name: name.encode() * (10 + 5 * i) for i, name in enumerate("abcdef")})
    peaks = []
    cache = PrefetchCache(tmp_path_factory.mktemp("c"), 60, remote.download, threads=2, on_reserved=peaks.append)
    held = set()
    for admit, key, names in ops:
        if admit and key not in held and sum(len(remote.files[n]) for n in names) <= 60:
            cache.admit(key, sizes(remote, *sorted(names)))
            held.add(key)
            for name in names:
                path = cache.local_path(name)
                assert path is None or open(path, "rb").read() == remote.files[name]
        elif not admit and key in held:
            cache.release(key)
            held.discard(key)
    for key in held:
        cache.release(key)
    cache.close()  # waits for downloads still in flight: a released one unreserves when it ends
    assert 0 <= min(peaks, default=0) and max(peaks, default=0) <= 60
    assert cache.reserved == 0
