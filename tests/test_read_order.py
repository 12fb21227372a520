"""The order a remote source downloads what the pool reads: the pool's chunk order as it will open its chunks
(`ChunkPool.read_order`; their bytes: tests/test_mp4_index.py),
the block downloads they make (`block_runs`: each block at the lowest rank of a read in it; without reads, depths
that grow along the range) and the download threads taking them shallowest first (`Prefetcher`)."""

import threading

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from dl.kits.remote.prefetch import RUN_BLOCKS, Piece, Prefetcher, Ranked, block_runs
from dl.plugins.pool.chunk_pool import ChunkPool


# ------------------------------------------------------------------------------------------- the pool's order
@settings(max_examples=examples(60), deadline=None, derandomize=True, database=None)
@given(lengths=st.lists(st.integers(1, 60), min_size=1, max_size=12), pool_size=st.integers(1, 6),
       chunk_frames=st.integers(1, 16), open_chunks=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_read_order_at_admission_is_the_order_chunks_open(lengths, pool_size, chunk_frames, open_chunks, seed):
    episodes = np.arange(100, 100 + len(lengths))
    pool = ChunkPool(episodes, np.array(lengths), pool_size, chunk_frames, open_chunks, np.random.default_rng(seed))
    predicted = {e: pool.read_order(e) for e in pool.open_episodes()}

    def admitted(e):
        predicted[e] = pool.read_order(e)

    pool.on_admit = admitted
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


def test_an_episode_waiting_for_a_slot_starts_at_rank_one():
    pool = ChunkPool(np.arange(4), np.array([32, 32, 32, 32]), 4, 8, 1, np.random.default_rng(0))
    ranks = {e: pool.read_order(e)[0][2] for e in pool.open_episodes()}
    assert sorted(ranks.values()) == [0, 1, 1, 1]  # one slot: one open chunk


# ------------------------------------------------------------------------------------------- zones
@settings(max_examples=examples(100), deadline=None, derandomize=True, database=None)
@given(start=st.integers(0, 5000), length=st.integers(1, 5000), block=st.integers(1, 700),
       reads=st.lists(st.tuples(st.integers(-100, 10600), st.integers(1, 900), st.integers(0, 5)), max_size=8))
def test_runs_tile_the_blocks_of_the_range_each_at_the_lowest_rank_it_holds(start, length, block, reads):
    end = start + length
    ranked = [Ranked("v", a, a + n, r) for a, n, r in reads]
    runs = block_runs([Piece("v", start, end)], ranked, block)
    blocks = [n for run in runs for n in range(run.first, run.last + 1)]
    assert blocks == list(range(start // block, (end - 1) // block + 1))  # each block once, ascending
    assert all(run.last - run.first < RUN_BLOCKS for run in runs)
    after = max((r.rank for r in ranked), default=-1) + 1
    for run in runs:
        for n in range(run.first, run.last + 1):
            ranks = [r.rank for r in ranked if r.start < (n + 1) * block and n * block < r.end]
            want = min(ranks, default=after) if ranked else (n - start // block + 1).bit_length() - 1
            assert run.depth == want


def test_without_reads_the_first_block_of_every_range_comes_first():
    runs = block_runs([Piece("a", 0, 1000), Piece("b", 250, 900)], [], 100)
    assert [(r.rel, r.first, r.last, r.depth) for r in sorted(runs)] == [
        ("a", 0, 0, 0), ("b", 2, 2, 0), ("a", 1, 2, 1), ("b", 3, 4, 1), ("a", 3, 6, 2), ("b", 5, 8, 2),
        ("a", 7, 9, 3)]


def test_the_prefetcher_runs_the_shallowest_task_first_ties_in_order():
    done, gate, finished = [], threading.Event(), threading.Event()
    prefetcher = Prefetcher(threads=1)
    prefetcher.submit("gate", 0, lambda: gate.wait(timeout=30))  # holds the one thread while the rest queue
    for key, depth in (("a", 2), ("b", 1), ("c", 2), ("d", 0)):
        prefetcher.submit(key, depth, lambda key=key: done.append(key))
    prefetcher.submit("end", 9, finished.set)
    prefetcher.cancel("c")
    gate.set()
    assert finished.wait(timeout=30)
    assert done == ["d", "b", "a"]


def test_a_failed_task_leaves_the_threads_running():
    prefetcher, finished = Prefetcher(threads=1), threading.Event()

    def fail():
        raise OSError("reset")

    prefetcher.submit("a", 0, fail)
    prefetcher.submit("b", 1, finished.set)
    assert finished.wait(timeout=30)
