"""dl.kits.remote.file_cache.PrefetchCache joins queued pieces that follow one another in a file into one
download of at most `coalesce_bytes`: fewer requests, each admitted byte still fetched once. A first read's piece
(depth 0, what a reader starts on) takes only first reads' pieces along; each range of a joint download is ready
as soon as its own bytes are in, and a joint download that fails fails the ranges not in yet. Once no reader has
waited for a download for `calm_s`, downloads join up to `calm_coalesce_bytes`."""

import os
import threading
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from test_prefetch_cache import Remote, read_at

from dl.contracts.errors import SourceFileNotFoundError
from dl.kits.remote.file_cache import Piece, PrefetchCache
from dl.kits.remote.file_ranges import merged
from dl.kits.remote.piece_order import PieceOrder, Ranked


class Calls:
    """A download that records every call `(rel, start, end)`, successful or not (threads append at once)."""

    def __init__(self, remote: Remote):
        self.remote, self.calls, self._lock = remote, [], threading.Lock()

    def __call__(self, rel, start, end, out):
        with self._lock:
            self.calls.append((rel, start, end))
        self.remote.download(rel, start, end, out)


def test_pieces_after_the_first_go_in_downloads_of_at_most_coalesce_bytes(tmp_path):
    remote = Remote({"v.mp4": bytes(range(200))})
    cache = PrefetchCache(tmp_path, 1000, remote.download, threads=1, order=PieceOrder(10, 40), coalesce_bytes=100)
    cache.admit(0, [Piece("v.mp4", 0, 200)])  # pieces 0-10 (depth 0), 10-30, 30-70, 70-110, 110-150, 150-190, 190-200
    cache.settle()
    assert remote.fetched == [("v.mp4", 0, 10), ("v.mp4", 10, 110), ("v.mp4", 110, 200)]
    assert read_at(cache, "v.mp4", 0, 200) == remote.files["v.mp4"]  # each piece its own range, read across them
    cache.release(0)
    assert cache.reserved == 0 and os.listdir(cache.dir) == []
    cache.close()


def test_a_first_read_cut_in_pieces_is_one_download_without_deeper_bytes(tmp_path):
    remote = Remote({"v.mp4": bytes(range(100))})
    cache = PrefetchCache(tmp_path, 1000, remote.download, threads=1, order=PieceOrder(10, 40, 35),
                          coalesce_bytes=100)
    cache.admit(0, [Piece("v.mp4", 0, 100)], reads=[Ranked("v.mp4", 0, 30, 0), Ranked("v.mp4", 30, 100, 1)])
    cache.settle()  # the first read in pieces 0-10 and 10-30 (depth 0), the rest in 30-65 and 65-100 (depth 1)
    assert remote.fetched == [("v.mp4", 0, 30), ("v.mp4", 30, 100)]
    cache.close()


def test_coalesce_bytes_zero_downloads_every_piece_alone(tmp_path):
    remote = Remote({"v.mp4": bytes(100)})
    cache = PrefetchCache(tmp_path, 1000, remote.download, threads=1, order=PieceOrder(10, 40), coalesce_bytes=0)
    cache.admit(0, [Piece("v.mp4", 0, 100)])
    cache.settle()
    assert remote.fetched == [("v.mp4", 0, 10), ("v.mp4", 10, 30), ("v.mp4", 30, 70), ("v.mp4", 70, 100)]
    cache.close()


def test_a_failed_joint_download_fails_every_range_in_it(tmp_path):
    download, ended = Calls(Remote({})), threading.Event()  # the file is gone from the store
    cache = PrefetchCache(tmp_path, 1000, download, threads=1, order=PieceOrder(10, 40), coalesce_bytes=100,
                          on_done=lambda: cache.ready(0) and ended.set())
    cache.admit(0, [Piece("gone.mp4", 0, 200)])
    assert ended.wait(timeout=30)  # the download thread tried every piece (no reader took one over)
    for pos in (0, 50, 150, 199):
        with pytest.raises(SourceFileNotFoundError, match="gone.mp4"):
            cache.locate("gone.mp4", pos)
    assert download.calls == [("gone.mp4", 0, 10), ("gone.mp4", 10, 110), ("gone.mp4", 110, 200)]
    assert cache.reserved == 0 and os.listdir(cache.dir) == []  # nothing reserved, no partial file left
    cache.release(0)
    cache.close()


@settings(max_examples=examples(80), deadline=None, derandomize=True, database=None)
@given(size=st.integers(1, 400), first=st.integers(1, 40), grow=st.integers(0, 3), coalesce=st.integers(0, 200),
       calm=st.none() | st.integers(0, 300), threads=st.integers(1, 3),
       ranges=st.lists(st.tuples(st.integers(0, 399), st.integers(1, 200)), min_size=1, max_size=5))
def test_joint_downloads_fetch_exactly_the_admitted_bytes_once(tmp_path_factory, size, first, grow, coalesce,
                                                               calm, threads, ranges):
    remote = Remote({"v.mp4": bytes(i % 251 for i in range(size))})
    download, order = Calls(remote), PieceOrder(first, first << grow)
    cache = PrefetchCache(tmp_path_factory.mktemp("c"), 10_000, download, threads=threads, order=order,
                          coalesce_bytes=coalesce, calm_coalesce_bytes=calm)
    pieces = [Piece("v.mp4", a, min(a + n, size)) for a, n in ranges if a < size]
    for key, piece in enumerate(pieces):
        cache.admit(key, [piece])
    cache.settle()
    calls = sorted(download.calls)
    assert all(b <= c for (_, _, b), (_, c, _) in pairwise(calls))  # no byte twice
    assert merged([Piece(*call) for call in calls]) == merged(pieces)  # every admitted byte, nothing else
    assert all(end - start <= max(coalesce, calm or 0, order.max_bytes) for _, start, end in calls)
    for piece in pieces:
        assert read_at(cache, "v.mp4", piece.start, piece.end) == remote.files["v.mp4"][piece.start:piece.end]
    cache.close()


def test_each_range_of_a_joint_download_is_ready_as_soon_as_its_bytes_are_in(tmp_path):
    """A reader waiting for the first range of a joint download gets it while the rest is still on its way
    (`dl.kits.remote.arrivals.Arrivals`): the download below only goes on once that reader has its bytes."""
    data = bytes(range(200))
    started, located, held_back = threading.Event(), threading.Event(), []

    def download(rel, start, end, out):
        if start == 10:  # the joint download 10-110: its first range (10-30), then the rest once a reader has it
            started.set()
            out.write(data[10:30])
            held_back.append(located.wait(timeout=30))
            start = 30
        out.write(data[start:end])

    cache = PrefetchCache(tmp_path, 1000, download, threads=1, order=PieceOrder(10, 40), coalesce_bytes=100)
    cache.admit(0, [Piece("v.mp4", 0, 200)])  # pieces 0-10 (alone, depth 0), then 10-30 + 30-70 + 70-110, 110-200
    assert started.wait(timeout=30)  # the download thread has the joint download (a reader never takes it over)
    first = cache.locate("v.mp4", 10)
    located.set()
    assert (first.start, first.end) == (10, 30)
    with open(first.path, "rb") as f:
        assert f.read() == data[10:30]
    cache.settle()
    assert held_back == [True]  # the first range was read before the joint download ended
    assert read_at(cache, "v.mp4", 0, 200) == data
    cache.close()


def test_a_joint_download_cut_midway_keeps_the_ranges_already_in_and_fails_the_rest(tmp_path):
    data = bytes(range(110))  # pieces 0-10 (alone, depth 0), then 10-30 + 30-70 + 70-110: the last download

    def download(rel, start, end, out):
        if start == 10:
            out.write(data[10:40])  # range 10-30 whole, 30-70 partly
            raise ConnectionResetError("reset by the test")
        out.write(data[start:end])

    cache = PrefetchCache(tmp_path, 1000, download, threads=1, order=PieceOrder(10, 40), coalesce_bytes=100)
    cache.admit(0, [Piece("v.mp4", 0, 110)])
    with pytest.raises(ConnectionResetError, match="reset by the test"):
        cache.settle()
    assert read_at(cache, "v.mp4", 0, 30) == data[:30]
    for pos in (30, 69, 70, 109):
        with pytest.raises(ConnectionResetError):
            cache.locate("v.mp4", pos)
    cache.release(0)
    assert cache.reserved == 0 and os.listdir(cache.dir) == []
    cache.close()


@pytest.mark.parametrize(("seconds_since_the_wait", "expected"), [
    (0.5, [("v.mp4", 10, 110), ("v.mp4", 110, 190), ("v.mp4", 190, 270), ("v.mp4", 270, 350), ("v.mp4", 350, 390)]),
    (1.5, [("v.mp4", 10, 310), ("v.mp4", 310, 390)]),
])
def test_downloads_join_up_to_calm_coalesce_bytes_once_no_reader_has_waited_for_calm_s(
        tmp_path, seconds_since_the_wait, expected):
    """A reader that finds its range still queued (it downloads it itself) has waited: for `calm_s` seconds of the
    cache's clock the downloads after it join up to `coalesce_bytes` (100), later up to `calm_coalesce_bytes` (300)."""
    data, now, first_piece, go = bytes(i % 251 for i in range(400)), [5.0], threading.Event(), threading.Event()

    def download(rel, start, end, out):
        if start == 0:  # the download thread holds the first piece until the test lets it go on
            first_piece.set()
            go.wait(timeout=30)
        out.write(data[start:end])

    calls = Calls(Remote({}))
    calls.remote.download = download
    cache = PrefetchCache(tmp_path, 1000, calls, threads=1, order=PieceOrder(10, 40), coalesce_bytes=100,
                          calm_coalesce_bytes=300, calm_s=1.0, clock=lambda: now[0])
    cache.admit(0, [Piece("v.mp4", 0, 400)])  # pieces 0-10 (depth 0), 10-30, 30-70, 70-110, ..., 350-390, 390-400
    assert first_piece.wait(timeout=30)
    assert read_at(cache, "v.mp4", 390, 400) == data[390:]  # queued: this reader waits, downloading it itself
    now[0] += seconds_since_the_wait
    go.set()
    cache.settle()
    assert calls.calls == [("v.mp4", 0, 10), ("v.mp4", 390, 400), *expected]
    assert read_at(cache, "v.mp4", 0, 400) == data
    cache.close()
