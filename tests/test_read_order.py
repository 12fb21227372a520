"""The order a remote source downloads what the pool reads: the pool's chunk order as it will open its chunks
(`ChunkPool.read_order`, `on_open`), those reads placed in a video span's bytes (`dl.kits.remote.span_reads`),
the zones and pieces they make (`PieceOrder.zones`: rank-0 bytes as placed, later bytes in pieces of about
`rest_bytes`, each at the lowest rank it holds), and the cache downloading by them (`PrefetchCache.admit`
with reads, `promote`; a piece per download: `coalesce_bytes=0`)."""

import threading

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from dl.kits.mp4_index import READ_AHEAD_BYTES
from dl.kits.remote.file_cache import Piece, PrefetchCache
from dl.kits.remote.piece_order import PieceOrder, Ranked
from dl.kits.remote.span_reads import MARGIN_BYTES, ranked_reads
from dl.plugins.pool.chunk_pool import ChunkPool


class Store:
    """A stand-in store for the generic cache: file contents by name, downloads recorded in order."""

    def __init__(self, data: bytes):
        self.data, self.fetched = data, []

    def download(self, rel, start, end, out):
        self.fetched.append((start, end))
        out.write(self.data[start:end])


# ------------------------------------------------------------------------------------------- the pool's order
@settings(max_examples=examples(60), deadline=None, derandomize=True, database=None)
@given(lengths=st.lists(st.integers(1, 60), min_size=1, max_size=12), pool_size=st.integers(1, 6),
       chunk_frames=st.integers(1, 16), open_chunks=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_read_order_at_admission_is_the_order_chunks_open(lengths, pool_size, chunk_frames, open_chunks, seed):
    episodes = np.arange(100, 100 + len(lengths))
    pool = ChunkPool(episodes, np.array(lengths), pool_size, chunk_frames, open_chunks, np.random.default_rng(seed))
    predicted = {e: pool.read_order(e) for e in pool.open_episodes()}
    open_at_start = sum(order[0][2] == 0 for order in predicted.values() if order)
    told = []

    def admitted(e):
        predicted[e] = pool.read_order(e)

    pool.on_admit, pool.on_open = admitted, told.append
    opened: dict[int, list[int]] = {}
    seen = set()
    for e, _, _ in pool:
        if pool.chunk.key not in seen:  # the chunk's first emission: it opened
            seen.add(pool.chunk.key)
            opened.setdefault(e, []).append(int(pool.chunk.rows[0]))
    assert set(predicted) == set(opened)
    for e, order in predicted.items():
        ranks = [rank for _, _, rank in order]
        assert ranks == list(range(ranks[0], ranks[0] + len(ranks))) and ranks[0] in (0, 1)
        assert [first for first, _, _ in order] == opened[e]
        assert all(0 <= last - first < chunk_frames for first, last, _ in order)
    # every chunk that opened after the pool was built was told, with its episode
    assert len(told) == len(seen) - open_at_start
    assert set(told) <= set(opened)


def test_an_episode_waiting_for_a_slot_starts_at_rank_one():
    pool = ChunkPool(np.arange(4), np.array([32, 32, 32, 32]), 4, 8, 1, np.random.default_rng(0))
    ranks = {e: pool.read_order(e)[0][2] for e in pool.open_episodes()}
    assert sorted(ranks.values()) == [0, 1, 1, 1]  # one slot: one open chunk


def test_on_open_names_the_episode_whose_chunk_opened():
    pool = ChunkPool(np.arange(3), np.array([20, 20, 20]), 3, 5, 2, np.random.default_rng(1))
    calls = []
    pool.on_open = lambda e: calls.append((e, pool.read_order(e)[0][2]))
    for _ in pool:
        pass
    assert calls and all(rank == 0 for _, rank in calls)  # when told, the episode's open chunk is its rank 0
    assert len(calls) == 3 * 4 - 2  # 12 chunks; the 2 open at the start were open before anyone listened


# ------------------------------------------------------------------------------------------- placing reads
def test_reads_are_placed_by_their_share_of_the_span_with_margins():
    frames = 1_000_000
    ranges = ((5000, 5000 + frames + READ_AHEAD_BYTES),)
    first, second = ranked_reads("v.mp4", ranges, 10.0, 20.0, ((15.0, 20.0, 0), (10.0, 12.5, 1)))
    assert first == Ranked("v.mp4", 5000 + frames // 2 - MARGIN_BYTES, ranges[0][1], 0)  # to the span's end
    assert second == Ranked("v.mp4", 5000, 5000 + frames // 4 + MARGIN_BYTES, 1)


def test_a_read_crossing_ranges_is_cut_at_their_gap():
    ranges = ((0, 100), (300, 400))
    (*parts,) = ranked_reads("v.mp4", ranges, 0.0, 1.0, ((0.0, 1.0, 0),))
    assert parts == [Ranked("v.mp4", 0, 100, 0), Ranked("v.mp4", 300, 400, 0)]


# ------------------------------------------------------------------------------------------- zones
@settings(max_examples=examples(100), deadline=None, derandomize=True, database=None)
@given(start=st.integers(0, 500), length=st.integers(1, 5000), rest=st.integers(1, 700),
       reads=st.lists(st.tuples(st.integers(-100, 5600), st.integers(1, 900), st.integers(0, 5)), max_size=8))
def test_zones_tile_the_range_with_rank_zero_first(start, length, rest, reads):
    order = PieceOrder(64, 256, rest)
    end = start + length
    ranked = [Ranked("v", a, a + n, r) for a, n, r in reads]
    zones = order.zones(start, end, ranked)
    assert zones[0][0] == start and zones[-1][1] == end
    assert all(b > a and b == c for (a, b, _), (c, _, _) in zip(zones, zones[1:], strict=False))

    def rank_at(pos):
        return min((r.rank for r in ranked if r.start <= pos < r.end), default=None)

    after = max((r.rank for r in ranked), default=0) + 1
    for a, b, depth in zones:
        ranks = {rank_at(p) for p in range(a, b)}
        if not ranked:
            continue
        if depth == 0:  # exactly the bytes a rank-0 read covers, as pieces grown from each zone's start
            assert ranks == {0} and b - a <= order.max_bytes
        else:
            assert 0 not in ranks and b - a <= rest
            assert depth == min(after if r is None else r for r in ranks)


def test_later_bytes_come_in_few_pieces_at_the_lowest_rank_they_hold():
    order = PieceOrder(100, 400, rest_bytes=300)
    zones = order.zones(0, 1000, [Ranked("v", 600, 700, 0), Ranked("v", 100, 200, 1)])
    assert zones == [(0, 300, 1), (300, 600, 2), (600, 700, 0), (700, 1000, 2)]


# ------------------------------------------------------------------------------------------- the cache
def gated(store: Store):
    """`store.download` held until the returned event is set."""
    gate = threading.Event()

    def download(rel, start, end, out):
        gate.wait(timeout=30)
        store.download(rel, start, end, out)

    return download, gate


def test_the_cache_downloads_rank_zero_reads_first_then_by_rank(tmp_path):
    store = Store(bytes(range(256)) * 8)
    download, gate = gated(store)
    cache = PrefetchCache(tmp_path, 10_000, download, threads=1, order=PieceOrder(100, 400, 300), coalesce_bytes=0)
    cache.admit("a", [Piece("v", 0, 1000)], reads=[Ranked("v", 600, 700, 0), Ranked("v", 100, 200, 1)])
    cache.admit("b", [Piece("v", 1000, 2000)], reads=[Ranked("v", 1000, 1100, 0)])
    gate.set()
    cache.settle()
    assert store.fetched == [(600, 700), (1000, 1100),  # every key's rank-0 reads
                             (0, 300), (1100, 1400), (1400, 1700), (1700, 2000),  # then depth 1
                             (300, 600), (700, 1000)]
    assert cache.ready("a") and cache.ready("b")
    located = cache.locate("v", 650)
    with open(located.path, "rb") as f:
        assert f.read() == store.data[600:700]
    cache.close()


def test_promoted_bytes_come_next(tmp_path):
    store = Store(bytes(3000))
    download, gate = gated(store)
    cache = PrefetchCache(tmp_path, 10_000, download, threads=1, order=PieceOrder(100, 400, 300), coalesce_bytes=0)
    cache.admit("a", [Piece("v", 0, 3000)], reads=[Ranked("v", 0, 100, 0)])
    later = list(zip(range(100, 3000, 290), range(390, 3001, 290), strict=True))  # 2,900 bytes in 10 pieces
    cache.promote([Piece("v", 2500, 2600)])
    gate.set()
    cache.settle()
    assert store.fetched == [(0, 100), (2420, 2710), *[p for p in later if p != (2420, 2710)]]
    cache.close()
