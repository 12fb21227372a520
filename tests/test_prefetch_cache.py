"""dl.kits.remote.file_cache.PrefetchCache: byte ranges as the unit (overlapping and adjacent ranges of several
episodes held once, only gaps downloaded), downloads cut into pieces, the first piece of every range first (an
atomic range never cut), reference counting of ranges shared by episodes, released ranges kept until their room
is needed (`keep_released`, least recently released first), the byte limit
(waiting in line, reads of waiting ranges go remote, one episode over the limit is an error), failed
downloads, and the run folder's clean-up on close and after a crash. Tests of the order of downloads turn joint
downloads off (`coalesce_bytes=0`; test_coalesced_downloads.py tests them)."""

import os
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from dl.contracts.errors import SourceFileNotFoundError
from dl.kits.remote.file_cache import CacheLimitError, Piece, PrefetchCache
from dl.kits.remote.piece_order import PieceOrder
from dl.kits.remote.run_folders import host_name


class Remote:
    """A stand-in remote store: file contents by name; `gate` holds downloads until set."""

    def __init__(self, files: dict[str, bytes]):
        self.files, self.fetched = files, []
        self.gate = threading.Event()
        self.gate.set()

    def download(self, rel, start, end, out):
        self.gate.wait(timeout=30)
        if rel not in self.files:
            raise SourceFileNotFoundError(f"remote://{rel} does not exist.")
        self.fetched.append(rel if (start, end) == (0, len(self.files[rel])) else (rel, start, end))
        out.write(self.files[rel][start:end])


def sizes(remote: Remote, *names: str) -> list[Piece]:
    """Whole files as pieces."""
    return [Piece(n, 0, len(remote.files[n])) for n in names]


def local_path(cache: PrefetchCache, rel: str) -> str | None:
    """The local copy of a whole file cached as one range (None: not cached)."""
    located = cache.locate(rel, 0)
    return None if located is None else located.path


def read_at(cache: PrefetchCache, rel: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of `rel` through the cached ranges, crossing from one into the next."""
    out = b""
    while start < end:
        located = cache.locate(rel, start)
        assert located is not None, f"{rel} byte {start} is not cached"
        with open(located.path, "rb") as f:
            f.seek(start - located.start)
            chunk = f.read(min(end, located.end) - start)
        out, start = out + chunk, start + len(chunk)
    return out


def cache_files(cache: PrefetchCache) -> list[str]:
    return sorted(os.listdir(cache.dir))


def test_shared_files_stay_until_the_last_episode_leaves(tmp_path):
    remote = Remote({"a": b"1" * 10, "shared": b"2" * 20, "b": b"3" * 30})
    cache = PrefetchCache(tmp_path, 1000, remote.download, threads=2)
    cache.admit(0, sizes(remote, "a", "shared"))
    cache.admit(1, sizes(remote, "shared", "b"))
    paths = {rel: local_path(cache, rel) for rel in ("a", "shared", "b")}
    assert {rel: open(p, "rb").read() for rel, p in paths.items()} == remote.files
    assert sorted(remote.fetched) == ["a", "b", "shared"]  # the shared file once
    cache.release(0)
    assert not os.path.exists(paths["a"]) and os.path.exists(paths["shared"])
    cache.release(1)
    assert cache_files(cache) == [] and cache.reserved == 0
    cache.close()
    assert not cache.dir.exists()


def test_kept_ranges_serve_a_later_admission_until_their_room_is_needed(tmp_path):
    remote = Remote({"a": b"1" * 10, "shared": b"2" * 20, "b": b"3" * 30, "c": b"4" * 10})
    cache = PrefetchCache(tmp_path, 60, remote.download, threads=2, keep_released=True)
    cache.admit(0, sizes(remote, "a", "shared"))
    cache.admit(1, sizes(remote, "shared", "b"))
    paths = {rel: local_path(cache, rel) for rel in ("a", "shared", "b")}
    assert {rel: open(p, "rb").read() for rel, p in paths.items()} == {rel: remote.files[rel] for rel in paths}
    assert sorted(remote.fetched) == ["a", "b", "shared"]  # the shared file once
    cache.release(0)  # "a" is kept (room is not needed yet), "shared" is held by episode 1
    assert os.path.exists(paths["a"]) and cache.reserved == 60
    cache.admit(2, sizes(remote, "c"))  # needs room: the released "a" goes
    assert open(local_path(cache, "c"), "rb").read() == remote.files["c"]
    assert not os.path.exists(paths["a"]) and os.path.exists(paths["shared"]) and cache.reserved == 60
    cache.release(1)
    cache.release(2)
    assert cache.reserved == 60  # downloaded ranges stay while nothing needs their room
    cache.admit(3, sizes(remote, "b", "shared"))  # a later epoch: served from the kept copies
    assert read_at(cache, "b", 0, 30) + read_at(cache, "shared", 0, 20) == remote.files["b"] + remote.files["shared"]
    assert sorted(remote.fetched) == ["a", "b", "c", "shared"]
    cache.release(3)
    cache.close()
    assert cache.reserved == 0 and not cache.dir.exists()


def test_released_ranges_make_room_least_recently_released_first(tmp_path):
    remote = Remote({name: name.encode() * 10 for name in "abcd"})
    cache = PrefetchCache(tmp_path, 30, remote.download, threads=1, keep_released=True)
    for key, name in enumerate("abc"):
        cache.admit(key, sizes(remote, name))
    cache.settle()
    for key in (1, 0, 2):  # released b, then a, then c
        cache.release(key)
    cache.admit(3, sizes(remote, "d"))  # room for one: b, released first, goes
    cache.settle()
    assert cache.locate("b", 0) is None
    assert [read_at(cache, name, 0, 10) for name in "acd"] == [remote.files[name] for name in "acd"]
    assert remote.fetched == ["a", "b", "c", "d"] and cache.reserved == 30
    cache.close()


def test_files_wait_for_room_and_reads_of_waiting_files_go_remote(tmp_path):
    remote = Remote({"a": b"1" * 60, "b": b"2" * 60})
    peaks = []
    cache = PrefetchCache(tmp_path, 100, remote.download, threads=1, on_reserved=peaks.append)
    cache.admit(0, sizes(remote, "a"))
    cache.admit(1, sizes(remote, "b"))  # does not block: b waits for room
    assert local_path(cache, "a") is not None
    assert local_path(cache, "b") is None  # the reader streams it instead of waiting (no deadlock)
    cache.release(0)
    assert open(local_path(cache, "b"), "rb").read() == remote.files["b"]
    assert max(peaks) <= 100
    cache.close()


def test_one_episode_larger_than_the_limit_is_an_error(tmp_path):
    remote = Remote({"a": b"1" * 60, "b": b"2" * 60})
    cache = PrefetchCache(tmp_path, 100, remote.download)
    with pytest.raises(CacheLimitError, match=r"episode 7 needs 0\.0 MB of a, b.*cache_bytes"):
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
    cache.admit(0, [Piece("gone.mp4", 0, 5)])
    for _ in range(2):
        with pytest.raises(SourceFileNotFoundError, match="gone.mp4"):
            local_path(cache, "gone.mp4")
    with pytest.raises(SourceFileNotFoundError):
        cache.settle()
    cache.release(0)
    assert cache.reserved == 0
    cache.close()


def test_a_reader_takes_over_a_queued_download(tmp_path):
    remote = Remote({"a": b"1" * 10, "b": b"2" * 10})
    a_started, b_read = threading.Event(), threading.Event()

    def download(rel, start, end, out):
        if rel == "a":  # holds the only download thread until "b" has been read
            a_started.set()
            b_read.wait(timeout=30)
        remote.download(rel, start, end, out)

    cache = PrefetchCache(tmp_path, 100, download, threads=1)
    cache.admit(0, sizes(remote, "a", "b"))
    assert a_started.wait(timeout=30)  # "b" is queued behind it
    assert open(local_path(cache, "b"), "rb").read() == remote.files["b"]
    assert remote.fetched == ["b"]  # downloaded by this thread while "a" still held the other one
    b_read.set()
    cache.close()


def test_release_during_download_deletes_the_file_after_it(tmp_path):
    remote = Remote({"a": b"1" * 10})
    remote.gate.clear()
    started, freed = threading.Event(), threading.Event()
    original = remote.download

    def download(rel, start, end, out):
        started.set()
        original(rel, start, end, out)

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

    def download(rel, start, end, out):
        if not first_started.is_set():  # the first download waits until the second one is done
            first_started.set()
            assert first_gate.wait(timeout=30)
        original(rel, start, end, out)

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
    path = local_path(cache, "a")  # this thread takes the second download over
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


def test_overlapping_ranges_of_two_episodes_download_only_the_gaps(tmp_path):
    remote = Remote({"v.mp4": bytes(range(200)) * 5})
    cache = PrefetchCache(tmp_path, 1000, remote.download, threads=1, coalesce_bytes=0)
    cache.admit(0, [Piece("v.mp4", 0, 100), Piece("v.mp4", 300, 500)])  # a header and an episode
    cache.admit(1, [Piece("v.mp4", 0, 100), Piece("v.mp4", 450, 700)])  # the same header, an episode overlapping
    assert read_at(cache, "v.mp4", 0, 100) == remote.files["v.mp4"][:100]
    assert read_at(cache, "v.mp4", 300, 700) == remote.files["v.mp4"][300:700]  # across two entries
    assert sorted(remote.fetched) == [("v.mp4", 0, 100), ("v.mp4", 300, 500), ("v.mp4", 500, 700)]
    assert cache.locate("v.mp4", 200) is None  # never admitted: the reader goes remote
    cache.release(0)
    assert read_at(cache, "v.mp4", 450, 700) == remote.files["v.mp4"][450:700]
    assert cache.reserved == 100 + 200 + 200  # the entry 300-500 stays whole: key 1 holds its part 450-500
    cache.release(1)
    assert cache.reserved == 0 and cache_files(cache) == []
    cache.close()


def test_pieces_of_one_admission_that_meet_are_one_download(tmp_path):
    remote = Remote({"v.mp4": bytes(300)})
    cache = PrefetchCache(tmp_path, 1000, remote.download, threads=1)
    cache.admit(0, [Piece("v.mp4", 100, 200), Piece("v.mp4", 0, 100), Piece("v.mp4", 150, 250)])
    cache.settle()
    assert remote.fetched == [("v.mp4", 0, 250)]
    cache.close()


@settings(max_examples=examples(40), deadline=None, derandomize=True, database=None)
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
                path = local_path(cache, name)
                assert path is None or open(path, "rb").read() == remote.files[name]
        elif not admit and key in held:
            cache.release(key)
            held.discard(key)
    for key in held:
        cache.release(key)
    cache.close()  # waits for downloads still in flight: a released one unreserves when it ends
    assert 0 <= min(peaks, default=0) and max(peaks, default=0) <= 60
    assert cache.reserved == 0


def gated(remote: Remote):
    """`remote.download` held at `remote.gate`, and an event set once the first download started."""
    remote.gate.clear()
    started = threading.Event()

    def download(rel, start, end, out):
        started.set()
        remote.download(rel, start, end, out)

    return download, started


def test_first_pieces_of_every_range_come_first(tmp_path):
    remote = Remote({"v.mp4": bytes(range(100)) * 3})
    download, started = gated(remote)
    cache = PrefetchCache(tmp_path, 1000, download, threads=1, order=PieceOrder(10, 40), coalesce_bytes=0)
    cache.admit(0, [Piece("v.mp4", 0, 100)])
    assert started.wait(timeout=30)  # the only thread holds piece 0-10
    cache.admit(1, [Piece("v.mp4", 200, 300)])
    assert not cache.ready(1, depth=0)
    remote.gate.set()
    cache.settle()
    assert cache.ready(0, depth=0) and cache.ready(1)
    assert remote.fetched == [("v.mp4", 0, 10), ("v.mp4", 200, 210), ("v.mp4", 10, 30), ("v.mp4", 210, 230),
                              ("v.mp4", 30, 70), ("v.mp4", 230, 270), ("v.mp4", 70, 100), ("v.mp4", 270, 300)]
    assert read_at(cache, "v.mp4", 0, 100) + read_at(cache, "v.mp4", 200, 300) == \
        remote.files["v.mp4"][:100] + remote.files["v.mp4"][200:]
    cache.close()


def test_a_piece_another_key_starts_on_moves_up(tmp_path):
    remote = Remote({"v.mp4": bytes(100)})
    download, started = gated(remote)
    cache = PrefetchCache(tmp_path, 1000, download, threads=1, order=PieceOrder(10, 40), coalesce_bytes=0)
    cache.admit(0, [Piece("v.mp4", 0, 100)])  # pieces 0-10, 10-30, 30-70, 70-100 (depths 0 to 3)
    assert started.wait(timeout=30)
    cache.admit(1, [Piece("v.mp4", 70, 100)])  # held already; its first piece for key 1
    remote.gate.set()
    cache.settle()
    assert remote.fetched == [("v.mp4", 0, 10), ("v.mp4", 70, 100), ("v.mp4", 10, 30), ("v.mp4", 30, 70)]
    cache.close()


def test_atomic_ranges_are_never_cut(tmp_path):
    remote = Remote({"v.mp4": bytes(100)})
    cache = PrefetchCache(tmp_path, 1000, remote.download, threads=1, order=PieceOrder(10, 40), coalesce_bytes=0)
    cache.admit(0, [Piece("v.mp4", 0, 100)], atomic=[Piece("v.mp4", 5, 25), Piece("other", 0, 100)])
    cache.settle()
    assert sorted(remote.fetched) == [("v.mp4", 0, 30), ("v.mp4", 30, 70), ("v.mp4", 70, 100)]
    cache.close()


@settings(max_examples=examples(200), deadline=None, derandomize=True, database=None)
@given(first=st.integers(1, 50), grow=st.integers(0, 4), start=st.integers(0, 500), lo=st.integers(0, 2000),
       length=st.integers(1, 3000), atomic=st.lists(st.tuples(st.integers(0, 3000), st.integers(1, 300)), max_size=3),
       held=st.lists(st.tuples(st.integers(0, 5000), st.integers(1, 500)), max_size=4))
def test_pieces_tile_the_gap_shallowest_first(first, grow, start, lo, length, atomic, held):
    order = PieceOrder(first, first << grow)
    lo += start
    fixed = [(a, a + n) for a, n in atomic]
    peers = [(a, a + n) for a, n in held]
    pieces = order.cut(order.zones(start, lo + length), (lo, lo + length), fixed, peers)
    cuts = {b for _, b, _ in pieces[:-1]}
    assert all(x in cuts for span in peers for x in span  # cut where a peer's file begins or ends...
               if lo < x < lo + length and not any(a < x < z for a, z in fixed))  # ...but inside an atomic range
    assert pieces[0][0] == lo and pieces[-1][1] == lo + length
    assert all(a < b and b == c for (a, b, _), (c, _, _) in zip(pieces, pieces[1:] + [(lo + length, 0, 0)],
                                                                strict=True))
    assert [d for _, _, d in pieces] == sorted(d for _, _, d in pieces)  # deeper into the range, deeper pieces
    assert not any(a < b < z for _, b, _ in pieces[:-1] for a, z in fixed)  # no cut inside an atomic range
    if not fixed:
        assert all(b - a <= order.max_bytes for a, b, _ in pieces)
        assert pieces[0][2] == order.depth(order.zones(start, lo + length), lo, lo + 1)
        assert lo != start or pieces[0][1] - lo <= first
