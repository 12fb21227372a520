"""The pool's second level: chunks of consecutive frames decoded in order, once, under a byte budget (ChunkPool,
DecodeBuffer), its shuffle, its memory bound, its fallback to per-sample decode, and resume with it."""

import warnings
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from pool_helpers import CAM0, FPS, consume, every_index, pool

import dl
from dl.contracts.errors import DlError, ResumeError
from dl.dataloader.shuffle import ideal_distinct_fraction
from dl.plugins.pool import dataset as pool_dataset
from dl.plugins.pool.chunk_pool import ChunkPool
from dl.plugins.pool.episode_pool import EpisodePool
from dl.plugins.pool.gop import episode_gop
from dl.plugins.pool.partition import partition_episodes
from dl.testing.synthetic import read_frame_code

FRAME = 96 * 128 * 3  # bytes of one decoded frame of pool_helpers.VIDEO


# ------------------------------------------------------------------------------------------ the order


@settings(max_examples=examples(60), deadline=None, derandomize=True, database=None)
@given(lengths=st.lists(st.integers(1, 30), min_size=1, max_size=12), pool_size=st.integers(1, 5),
       chunk_frames=st.integers(1, 8), open_chunks=st.integers(1, 6), subset=st.booleans(), seed=st.integers(0, 99))
def test_chunk_pool_emits_each_row_once_from_open_chunks(lengths, pool_size, chunk_frames, open_chunks, subset, seed):
    rng = np.random.default_rng(seed)
    episodes = np.arange(100, 100 + len(lengths))
    rows = [np.sort(rng.choice(n, size=max(1, n // 2), replace=False)) for n in lengths] if subset else None
    sizes = np.array([len(r) for r in rows]) if subset else np.asarray(lengths)
    p = ChunkPool(episodes, sizes, pool_size, chunk_frames, open_chunks, np.random.default_rng(seed), rows)
    emitted, open_chunks_now, done = [], {}, set()
    for episode, row, last in p:
        chunk = p.chunk
        assert chunk.episode == episode and row in chunk.rows and chunk.index == row // chunk_frames
        assert all(r // chunk_frames == chunk.index for r in chunk.rows)  # consecutive rows of one chunk
        open_chunks_now[chunk.key] = True
        assert len(open_chunks_now) <= open_chunks, "more chunks open than the budget holds"
        assert len({e for e, _ in open_chunks_now}) == len(open_chunks_now), "two open chunks of one episode"
        if chunk.closed:
            del open_chunks_now[chunk.key]
        assert episode not in done
        if last:
            done.add(episode)
        emitted.append((episode, row))
    expected = [(e, int(r)) for e, n, rs in zip(episodes, lengths, rows or [None] * len(lengths), strict=True)
                for r in (rs if rs is not None else range(n))]
    assert sorted(emitted) == sorted(expected) and len(emitted) == len(set(emitted))
    assert not open_chunks_now and done == set(episodes.tolist())


def batch_fraction(pool, batch_size=16):
    seq = [e for e, _, _ in pool]
    return np.mean([len(set(seq[i:i + batch_size])) / batch_size for i in range(0, len(seq) - batch_size + 1,
                                                                                 batch_size)])


def test_chunk_pool_batches_mix_as_many_episodes_as_a_uniform_draw():
    """With a chunk slot per episode, drawing episodes by frames left mixes batches like the episode pool (the
    i.i.d. ceiling); with half as many slots, fewer episodes are open at once and batches mix fewer."""
    lengths = np.random.default_rng(0).integers(200, 600, size=20)
    episodes = np.arange(20)
    ideal = ideal_distinct_fraction(lengths, 16)
    def mean_fraction(make):
        return np.mean([batch_fraction(make(np.random.default_rng(seed))) for seed in range(6)])

    episode_pool = mean_fraction(lambda rng: EpisodePool(episodes, lengths, 32, rng))
    full = mean_fraction(lambda rng: ChunkPool(episodes, lengths, 32, 12, 24, rng))
    half = mean_fraction(lambda rng: ChunkPool(episodes, lengths, 32, 12, 10, rng))
    assert abs(episode_pool / ideal - 1) < 0.03
    assert full >= 0.97 * ideal, (full, ideal)
    assert 0.7 * ideal <= half < full


# ------------------------------------------------------------------------------------------ decoding


def record_requests(ds, monkeypatch):
    requests = []
    original = ds.decoder.decode

    def decode(source, batch):
        requests.extend(batch)
        return original(source, batch)

    monkeypatch.setattr(ds.decoder, "decode", decode)
    return requests


def test_each_frame_is_decoded_once_in_runs(video_root, monkeypatch):
    ds = pool(video_root, episode_pool_size=2, decode_budget=3 * 4 * FRAME, decode_chunk_frames=4)
    assert ds.order.open_chunks == 3
    requests = record_requests(ds, monkeypatch)
    seen = []
    for sample in ds:
        index = int(sample["index"])
        assert read_frame_code(sample[CAM0]) == (index, 0)
        seen.append(index)
    assert sorted(seen) == every_index(ds) and seen != sorted(seen)
    assert all(r.run for r in requests), "a chunk decodes runs of consecutive frames"
    decoded = Counter((r.path, round(t * FPS)) for r in requests for t in r.timestamps)
    assert sum(decoded.values()) == len(seen) and max(decoded.values()) == 1, "every frame decoded exactly once"
    assert len(requests) == sum(-(-ep.length // 4) for ep in ds.episodes), "one run per chunk"


def test_camera_windows_decode_from_the_chunk_buffer(video_root, monkeypatch):
    delta = {CAM0: [-2 / FPS, 0.0, 3 / FPS], "action": [0.0, 1 / FPS]}
    ds = pool(video_root, episode_pool_size=2, decode_budget="1M", decode_chunk_frames=4, delta_timestamps=delta,
              image_dtype="float32")
    reference = dl.make_dataset(str(video_root), delta_timestamps=delta)
    requests = record_requests(ds, monkeypatch)
    for sample in ds:
        expected = reference[reference.position_of(int(sample["index"]))]
        assert torch.equal(sample[CAM0], expected[CAM0]) and torch.equal(sample[f"{CAM0}_is_pad"],
                                                                           expected[f"{CAM0}_is_pad"])
    assert requests and all(r.run for r in requests), "window frames come from the chunks' runs"
    assert all(len(r.timestamps) <= 3 * 4 for r in requests), "at most a chunk's rows per window offset"


def test_decoded_bytes_stay_within_the_budget(video_root):
    budget = 2 * 4 * FRAME
    ds = pool(video_root, episode_pool_size=3, decode_budget=budget, decode_chunk_frames=4)
    consume(ds, 2)
    stats = ds.figures(2, 3)
    assert stats["decode_open_chunks"] == 2 and stats["decode_budget"] == budget
    assert 0 < stats["decode_buffer_bytes_peak"] <= 2 * budget, "summed over 2 workers, each within its budget"
    assert stats["frames_decoded"] == len(every_index(ds)) and stats["chunks_decoded"] > 0


def test_a_budget_too_small_for_one_chunk_decodes_per_sample(video_root, monkeypatch):
    with pytest.warns(UserWarning, match="holds no chunk of 16 frames .* decoding each sample on its own"):
        ds = pool(video_root, decode_budget=FRAME, decode_chunk_frames=16)
    assert ds.order.open_chunks == 0
    requests = record_requests(ds, monkeypatch)
    assert sorted(int(s["index"]) for s in ds) == every_index(ds)
    assert requests and not any(r.run for r in requests) and all(len(r.timestamps) == 1 for r in requests)


def test_no_budget_no_warning_and_the_chunk_level_off(video_root):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = pool(video_root, decode_budget=0)
    assert ds.order.open_chunks == 0 and "decode_open_chunks" not in ds.resume_invariants(3, 0)


@pytest.mark.parametrize(("pool_size", "budget", "chunk_frames", "open_chunks"),
                         [(3, 3 * 5 * FRAME, 5, 3),  # the longest chunk that keeps one open per open episode
                          (9, 5 * 5 * FRAME, 5, 5),  # 5 episodes: the pool never holds more
                          (3, 10**9, 16, 10**9 // (16 * FRAME)),  # capped at MAX_AUTO_CHUNK_FRAMES
                          (3, 2 * FRAME, 1, 2)])  # not even a frame per open episode: single frames
def test_auto_chunk_frames_fit_a_chunk_per_open_episode(video_root, pool_size, budget, chunk_frames, open_chunks):
    ds = pool(video_root, episode_pool_size=pool_size, decode_budget=budget)
    assert (ds.order.chunk_frames, ds.order.open_chunks) == (chunk_frames, open_chunks)
    assert ds.figures(0, 4)["decode_chunk_frames"] == chunk_frames
    assert sorted(int(s["index"]) for s in ds) == every_index(ds)


def owned_by_a_worker_of_two(ds):
    """The most episodes one of 2 DataLoader workers owns in epoch 0."""
    return max(len(p) for p in partition_episodes(ds.lengths, 2, ds.config.seed, 0))


def test_auto_chunk_frames_fit_the_episodes_a_worker_opens(video_root, monkeypatch):
    """The budget holds a 4-frame chunk for each episode one of 2 workers owns, but not for each of the 5 episodes
    one process opens alone: "auto" picks 4-frame chunks once the DataLoader's workers are known, shorter ones
    without workers, and a given length never changes. The videos' keyframe grid is read once."""
    ds = pool(video_root, episode_pool_size=5)
    budget = owned_by_a_worker_of_two(ds) * 4 * FRAME
    grids = []

    def counted(meta, episode):
        grids.append(episode_gop(meta, episode))
        return grids[-1]

    monkeypatch.setattr(pool_dataset, "episode_gop", counted)
    ds = pool(video_root, episode_pool_size=5, decode_budget=budget)
    alone = ds.order.chunk_frames
    assert alone < 4
    loader = dl.make_dataloader(ds, batch_size=3, num_workers=2)
    assert (ds.order.chunk_frames, ds.order.open_chunks) == (4, budget // (4 * FRAME))
    batches = list(loader)
    assert sorted(i for b in batches for i in b["index"].tolist()) == every_index(ds)
    assert all(read_frame_code(f) == (i, 0) for b in batches for i, f in zip(b["index"].tolist(), b[CAM0],
                                                                                 strict=True))
    assert ds.figures(2, 3)["decode_chunk_frames"] == 4
    dl.make_dataloader(ds, batch_size=3, num_workers=0)
    assert ds.order.chunk_frames == alone and len(grids) == 1
    given = pool(video_root, episode_pool_size=5, decode_budget=budget, decode_chunk_frames=3)
    dl.make_dataloader(given, batch_size=3, num_workers=2)
    assert given.order.chunk_frames == 3


def test_a_resume_in_other_workers_keeps_the_saved_auto_chunks(video_root):
    """A state saved with 2 workers (4-frame "auto" chunks) resumes without workers (where "auto" alone picks
    shorter ones) in the saved chunks: the replay of the saved shape needs them; every frame comes once."""
    budget = owned_by_a_worker_of_two(pool(video_root, episode_pool_size=5)) * 4 * FRAME
    saved = dl.make_dataloader(pool(video_root, episode_pool_size=5, decode_budget=budget, seed=1), batch_size=3,
                               num_workers=2)
    batches = iter(saved)
    head = [i for _ in range(3) for i in next(batches)["index"].tolist()]
    state = saved.state_dict()
    del batches
    assert state["invariants"]["decode_chunk_frames"] == 4
    resumed = dl.make_dataloader(pool(video_root, episode_pool_size=5, decode_budget=budget, seed=1), batch_size=3)
    assert resumed.dataset.order.chunk_frames < 4
    resumed.load_state_dict(state)
    assert resumed.dataset.order.chunk_frames == 4
    tail = [i for b in resumed for i in b["index"].tolist()]
    assert sorted(head + tail) == every_index(resumed.dataset)
    fixed = dl.make_dataloader(pool(video_root, episode_pool_size=5, decode_budget=budget, seed=1,
                                    decode_chunk_frames=2), batch_size=3)
    with pytest.raises(ResumeError, match="decode_chunk_frames: saved 4, now 2"):
        fixed.load_state_dict(state)


def test_default_budget_decodes_in_chunks(video_root):
    ds = pool(video_root)
    assert ds.decode_budget == 256_000_000 and ds.order.open_chunks == 256_000_000 // (16 * FRAME)


@pytest.mark.parametrize(("options", "match"), [({"decode_budget": "lots"}, "decode_budget: expected a size"),
                                                ({"decode_budget": -1}, "cannot be negative"),
                                                ({"decode_chunk_frames": 0}, "decode_chunk_frames must be")])
def test_bad_decode_options_are_refused(video_root, options, match):
    with pytest.raises(DlError, match=match):
        pool(video_root, **options)


# ------------------------------------------------------------------------------------------ resume


def test_a_resume_needs_the_same_open_chunks(video_root):
    loader = dl.make_dataloader(pool(video_root, decode_budget=2 * 4 * FRAME, decode_chunk_frames=4, seed=1),
                                batch_size=3)
    batches = iter(loader)
    next(batches)
    state = loader.state_dict()
    same = dl.make_dataloader(pool(video_root, decode_budget=2 * 4 * FRAME + 100, decode_chunk_frames=4, seed=1),
                              batch_size=3)
    same.load_state_dict(state)  # another budget holding as many chunks orders frames the same way
    assert [b["index"].tolist() for b in same] == [b["index"].tolist() for b in batches]
    other = dl.make_dataloader(pool(video_root, decode_budget=3 * 4 * FRAME, decode_chunk_frames=4, seed=1),
                               batch_size=3)
    with pytest.raises(ResumeError, match="decode_open_chunks: saved 2, now 3"):
        other.load_state_dict(state)
