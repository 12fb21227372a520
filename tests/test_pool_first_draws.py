"""A prefetching source hears of a consumer's open episodes in the order the pool first draws them, and of its
chunks ranked in the order they are first drawn (`dl.plugins.pool.first_draws`): read ahead on a copy of the pool,
which leaves the pool's own order untouched."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from pool_helpers import TABULAR, VIDEO, every_index

import dl
from dl.format.frame_times import span_frames
from dl.plugins.pool import first_draws
from dl.plugins.pool.chunk_pool import ChunkPool
from dl.plugins.pool.episode_pool import EpisodePool
from dl.plugins.pool.first_draws import AHEAD_DRAWS, DRAWS_PER_EPISODE, read_ahead


def _pools(kind: str, lengths: list[int], pool_size: int, chunk_frames: int, open_chunks: int, seed: int,
           elastic: bool):
    """Two identical pools (same episodes, lengths and seed); `elastic`: each episode's every other row of twice its
    length, as an elastic segment streams what is left of its episodes."""
    episodes, lengths = np.arange(len(lengths)) * 3 + 1, np.asarray(lengths)  # positions that are not 0..n-1
    rows = [np.arange(0, 2 * n, 2) for n in lengths] if elastic else None
    if kind == "chunks":
        return [ChunkPool(episodes, lengths, pool_size, chunk_frames, open_chunks, np.random.default_rng(seed), rows)
                for _ in range(2)]
    return [EpisodePool(episodes, lengths, pool_size, np.random.default_rng(seed), rows) for _ in range(2)]


@settings(max_examples=examples(120), deadline=None, derandomize=True, database=None)
@example(kind="episodes", lengths=[3, 3, 2, 3, 1, 1, 40, 40], pool_size=4, chunk_frames=1, open_chunks=1, skip=0,
         seed=104, elastic=False)  # an open episode runs out, and one admitted after it is drawn, before all are
@given(kind=st.sampled_from(["chunks", "episodes"]), lengths=st.lists(st.integers(1, 60), min_size=1, max_size=12),
       pool_size=st.integers(1, 8), chunk_frames=st.integers(1, 9), open_chunks=st.integers(1, 6),
       skip=st.integers(0, 40), seed=st.integers(0, 2**16), elastic=st.booleans())
def test_the_order_is_that_of_first_emissions_and_the_pool_is_left_as_it_was(kind, lengths, pool_size, chunk_frames,
                                                                             open_chunks, skip, seed, elastic):
    looked, plain = _pools(kind, lengths, pool_size, chunk_frames, open_chunks, seed, elastic)
    for _ in range(min(skip, sum(lengths) - 1)):  # anywhere in the epoch (a resumed consumer fast-forwards)
        next(looked), next(plain)
    waiting = looked.open_episodes()
    ahead = read_ahead(looked)
    assert sorted(ahead.episodes) == sorted(waiting)

    emitted = [(e, row, getattr(looked, "chunk", None)) for e, row, _ in looked]
    assert [(e, row) for e, row, _ in emitted] == [(e, row) for e, row, _ in plain]  # the pool's RNG is untouched
    horizon = emitted[:max(AHEAD_DRAWS, DRAWS_PER_EPISODE * len(waiting))]  # the whole epoch here
    episodes = [e for e, _, _ in horizon]
    firsts = [e for i, e in enumerate(episodes) if e in waiting and e not in episodes[:i]]
    assert ahead.episodes == firsts + [e for e in waiting if e not in firsts]
    chunks = list(dict.fromkeys(chunk.key for _, _, chunk in horizon)) if kind == "chunks" else []
    assert ahead.chunks == {key: i for i, key in enumerate(chunks)}  # every chunk, in the order it is first drawn


def test_chunks_past_the_horizon_rank_after_those_read_ahead_in_their_episode_order(monkeypatch):
    monkeypatch.setattr(first_draws, "AHEAD_DRAWS", 10)
    monkeypatch.setattr(first_draws, "DRAWS_PER_EPISODE", 1)
    pool, _ = _pools("chunks", [40, 25, 33], pool_size=3, chunk_frames=4, open_chunks=2, seed=7, elastic=False)
    ahead = first_draws.read_ahead(pool)
    seen = len(ahead.chunks)
    assert 2 <= seen <= 10  # the open chunks and those opened within 10 draws
    for e in pool.open_episodes():
        order = pool.read_order(e)
        ranked = ahead.ranked(e, order, chunk_frames=4)
        assert [(first, last) for first, last, _ in ranked] == [(first, last) for first, last, _ in order]
        for (first, _, rank), (_, _, was) in zip(ranked, order, strict=True):
            if was == 0:
                assert rank == 0  # the open chunk stays first
            elif (e, first // 4) in ahead.chunks:
                assert rank == 1 + ahead.chunks[e, first // 4]
            else:
                assert rank == 1 + seen + was


@pytest.fixture
def remote_copy(tmp_path, in_memory):
    """`remote_copy(name, config)`: a synthetic dataset written locally and put on fsspec's in-memory filesystem (a
    remote source: it prefetches); its URL (`in_memory`)."""
    from dl.testing.synthetic import SyntheticConfig, write_synthetic_dataset

    def make(name: str, config: dict) -> str:
        write_synthetic_dataset(tmp_path / name, SyntheticConfig(**config))
        return in_memory(tmp_path / name, name)

    return make


def _admissions(url: str, **options):
    """(keys the source was told of before the first sample, episodes in the order of their first sample, the
    dataset) of one pass over a pool dataset in this process."""
    ds = dl.make_dataset(url, source="bucket", loader="pool", seed=options.pop("seed"), loader_options=options)
    told, admit = [], ds.meta.source.admit
    ds.meta.source.admit = lambda key, files: (told.append(key), admit(key, files))
    first_told, seen = None, []
    for sample in ds:
        if first_told is None:
            first_told = list(told)
        episode = int(sample["episode_index"])
        if episode not in seen:
            seen.append(episode)
    return first_told, seen, ds


def test_a_prefetching_source_hears_of_the_open_episodes_in_the_order_they_are_first_drawn(remote_copy):
    told, seen, _ = _admissions(remote_copy("tabular", TABULAR), episode_pool_size=7, seed=3)
    assert len(told) == 7 and told == seen  # every episode open at once: told in the order they come out
    assert told != sorted(told)


def test_with_chunks_the_first_episodes_told_are_those_drawn_first(remote_copy):
    told, seen, ds = _admissions(remote_copy("video", VIDEO), episode_pool_size=3, decode_chunk_frames=4,
                                 seed=5)
    assert len(told) == 3 and told == seen[:3]
    assert sorted(int(s["index"]) for s in ds) == every_index(ds)  # and the epoch is whole, each frame once


def test_the_source_hears_the_chunks_ranked_in_the_order_they_are_first_drawn(remote_copy):
    """Episodes of 10-30 frames, 3 open of 5 (two admitted later): ranked by their number in their episode, a long
    episode's chunks would wait behind a short one's; the ranks give the draw order of every chunk but the open
    ones (rank 0), later admissions included."""
    url = remote_copy("ranks", VIDEO)
    ds = dl.make_dataset(url, source="bucket", loader="pool", seed=11,
                         loader_options={"episode_pool_size": 3, "decode_chunk_frames": 4})
    told, admit = {}, ds.meta.source.admit

    def hear(key, files):
        for span in files:
            begin = span_frames(ds.meta.frame_times.of(ds.meta, span.path), span.from_timestamp, span.to_timestamp,
                                0)[0] if span.reads else 0
            for start, _, rank in span.reads:  # the file's frames
                told[key, (start - begin) // 4] = rank
        admit(key, files)

    ds.meta.source.admit = hear
    drawn = list(dict.fromkeys((int(s["episode_index"]), int(s["frame_index"]) // 4) for s in ds))
    later = [chunk for chunk in drawn if told[chunk] > 0]
    assert len(told) == len(drawn) and len(later) > len(drawn) // 2
    assert sorted(later, key=told.get) == later
    assert len({told[chunk] for chunk in later}) == len(later)  # no ties


def test_the_pool_s_order_does_not_depend_on_whether_its_source_prefetches(remote_copy, tmp_path):
    """Through `bucket` (`Prefetches`: told every episode with its ranked reads) and through the local folder (told
    nothing), two epochs give the same samples in the same order."""
    url = remote_copy("again", VIDEO)
    options = {"episode_pool_size": 3, "decode_chunk_frames": 4}

    def epochs(ds) -> list[list[tuple[int, int]]]:
        return [[(int(s["episode_index"]), int(s["frame_index"])) for s in ds] for _ in range(2)]

    remote = dl.make_dataset(url, source="bucket", loader="pool", seed=5, loader_options=options)
    heard, admit = [], remote.meta.source.admit
    remote.meta.source.admit = lambda key, files: (heard.append(any(s.reads for s in files)), admit(key, files))
    local = dl.make_dataset(str(tmp_path / "again"), source="local", loader="pool", seed=5, loader_options=options)
    assert epochs(remote) == epochs(local)
    assert len(heard) == 10 and all(heard)  # 5 episodes an epoch, each told with its reads
