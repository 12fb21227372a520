"""The pool loader's samples and pool: value parity with the `map` loader, uniform admission (also from one
collapsed row group, read partially), shuffle quality, tabular-only pool memory, decode as a sample leaves the
pool, options."""

from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import torch.utils.data
from pool_helpers import (
    CAM0,
    COLLAPSED,
    FPS,
    TABULAR,
    TABULAR_BYTES_PER_FRAME,
    consume,
    every_index,
    pool,
    resumable,
)

import dl
from dl.contracts.errors import DlError
from dl.plugins.pool.episode_pool import EpisodePool
from dl.testing.synthetic import read_frame_code

# ------------------------------------------------------------------------------- parity with map


@pytest.mark.parametrize("windows", [False, True], ids=["plain", "delta-windows"])
def test_values_equal_the_map_loader(small_dataset, windows):
    delta = {"action": [-2 / FPS, 0, 1 / FPS, 5 / FPS], CAM0: [-1 / FPS, 0, 2 / FPS],
             "observation.state": [-1 / FPS, 0]} if windows else None
    pool_ds = pool(small_dataset, delta_timestamps=delta, image_dtype="float32", episode_pool_size=3, seed=7)
    map_ds = dl.make_dataset(str(small_dataset), delta_timestamps=delta)
    seen, padded = [], Counter()
    for sample in pool_ds:
        index = sample["index"].item()
        seen.append(index)
        expected = map_ds[map_ds.position_of(index)]
        assert set(sample) == set(expected), index
        for key, value in expected.items():
            if isinstance(value, torch.Tensor):
                assert sample[key].dtype == value.dtype and torch.equal(sample[key], value), (index, key)
            else:
                assert sample[key] == value, (index, key)
        padded.update(k for k in sample if k.endswith("_is_pad") and sample[k].any())
    assert sorted(seen) == every_index(map_ds) and seen != sorted(seen)  # whole epoch, shuffled
    if windows:  # episode edges were crossed for every windowed key
        assert set(padded) == {"action_is_pad", f"{CAM0}_is_pad", "observation.state_is_pad"}


# ----------------------------------------------------------------------------- uniform admission


def test_episode_pool_emits_every_row_once_with_bounded_open_episodes():
    rng = np.random.default_rng(0)
    for pool_size in (1, 3, 50):
        lengths = rng.integers(1, 9, size=20)
        episodes = np.arange(100, 120)
        p = EpisodePool(episodes, lengths, pool_size, np.random.default_rng(pool_size))
        assert len(p.open_episodes()) == min(pool_size, 20)
        emitted, done, open_ = [], set(), set()
        for episode, row, last in p:
            assert episode not in done
            emitted.append((episode, row))
            open_.add(episode)
            assert len(open_) <= pool_size
            if last:
                done.add(episode)
                open_.discard(episode)
        assert sorted(emitted) == [(e, r) for e, n in zip(episodes, lengths, strict=True) for r in range(n)]
        assert done == set(episodes.tolist()) and p.admitted == 20


def test_admission_is_uniform_over_the_episodes():
    """Which episodes enter the pool first, and the order episodes are first emitted, are uniform over
    the consumer's episodes (not their file order): a file-ordered admission fails both checks."""
    episodes, pool_size, seeds = 64, 4, 300
    lengths = np.random.default_rng(0).integers(4, 7, size=episodes)
    first_pool = Counter()
    first_emission_rank = np.zeros(episodes)
    for seed in range(seeds):
        p = EpisodePool(np.arange(episodes), lengths, pool_size, np.random.default_rng(seed))
        first_pool.update(p.open_episodes())
        order = list(dict.fromkeys(e for e, _, _ in p))
        assert sorted(order) == list(range(episodes))
        first_emission_rank[order] += np.arange(episodes)
    mean_rank = first_emission_rank / seeds
    # uniform: every mean rank is 31.5 +- 1.07 (one standard error); file order: 1.5 ... 62.5
    assert np.abs(mean_rank - (episodes - 1) / 2).max() < 6
    expected = seeds * pool_size / episodes
    chi2 = sum((first_pool[e] - expected) ** 2 / expected for e in range(episodes))
    assert chi2 < 130  # 63 degrees of freedom: mean 63, sd 11; file order gives ~1200 x more


def test_first_batches_span_a_collapsed_row_group(dataset_factory):
    root = dataset_factory(**COLLAPSED)
    assert pq.ParquetFile(root / "data/chunk-000/file-000.parquet").num_row_groups == 1
    first = []
    for seed in range(8):
        ds = pool(root, seed=seed, episode_pool_size=4)
        batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=8, num_workers=0)))
        first += batch["episode_index"].tolist()
    assert len(set(first)) >= 16 and max(first) >= 48 and 16 <= np.mean(first) <= 48


def spy_iter_batches(monkeypatch):
    """Record the rows each ParquetFile.iter_batches call handed out before its consumer stopped."""
    calls = []
    original = pq.ParquetFile.iter_batches

    def spy(self, *args, **kwargs):
        calls.append(0)
        n = len(calls) - 1
        for batch in original(self, *args, **kwargs):
            calls[n] += batch.num_rows
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    return calls


def test_an_early_episode_of_a_collapsed_row_group_is_read_partially(dataset_factory, monkeypatch):
    root = dataset_factory(**COLLAPSED)
    total_rows = pq.ParquetFile(root / "data/chunk-000/file-000.parquet").metadata.num_rows
    assert total_rows == 64 * 80
    early, late = pool(root, episodes=[0, 1], episode_pool_size=2), pool(root, episodes=[63], episode_pool_size=1)
    whole_reads = []
    original_read = pq.ParquetFile.read_row_groups

    def read_row_groups(self, row_groups, columns=None, **kwargs):
        if columns is None or not set(columns) <= {"index", "episode_index"}:  # locating rows is no whole read
            whole_reads.append(columns)
        return original_read(self, row_groups, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", read_row_groups)
    monkeypatch.setattr(pq.ParquetFile, "read", lambda self, *a, **k: whole_reads.append("read"))
    calls = spy_iter_batches(monkeypatch)
    assert sorted(s["index"].item() for s in early) == list(range(160))
    assert len(calls) == 2 and all(80 <= rows < total_rows for rows in calls), calls
    assert not whole_reads
    calls.clear()
    # a late episode needs the rows up to its end: the spy sees them all
    assert sorted(s["index"].item() for s in late) == list(range(total_rows - 80, total_rows))
    assert calls == [total_rows] and not whole_reads


# --------------------------------------------------------------------------------- shuffle quality


@pytest.mark.slow
def test_batches_mix_many_episodes(dataset_factory):
    root = dataset_factory(episodes=512, frames_per_episode=(8, 8), cameras=0, episodes_per_file=64,
                           row_group_size=None)
    ds = pool(root, episode_pool_size=128)
    distinct = [len(set(batch["episode_index"].tolist())) / 16
                for batch in torch.utils.data.DataLoader(ds, batch_size=16, num_workers=2)]
    assert len(distinct) == 512 * 8 // 16
    assert np.mean(distinct) >= 0.9


# ------------------------------------------------------------------------------------ pool memory


def test_pool_holds_tabular_rows_only(video_root):
    root = video_root
    ds = pool(root, episode_pool_size=2)
    assert sum(1 for _ in torch.utils.data.DataLoader(ds, batch_size=4, num_workers=0)) > 0
    stats = ds.figures(0, 4)
    assert {"episode_pool_size", "episodes_admitted", "pool_bytes_peak", "shuffle_randomness_consumer_ideal"} <= set(
        stats)
    assert stats["episode_pool_size"] == 2 and stats["episodes_admitted"] == len(ds.episodes) == 5
    longest = max(ep.length for ep in ds.episodes)
    shortest = min(ep.length for ep in ds.episodes)
    assert shortest * TABULAR_BYTES_PER_FRAME <= stats["pool_bytes_peak"] <= 2 * longest * TABULAR_BYTES_PER_FRAME
    assert stats["pool_bytes_peak"] < 3 * 96 * 128  # less than one decoded frame: no frames in the pool
    assert stats.get("resume_fast_forward_s", 0) == 0  # no resume happened


def test_resume_fast_forward_is_reported(dataset_factory):
    root = dataset_factory(**TABULAR)
    loader = resumable(root, 0, 4, episode_pool_size=2)
    for n, _ in enumerate(loader, 1):
        if n == 5:
            break
    resumed = resumable(root, 0, 4, episode_pool_size=2)
    resumed.load_state_dict(loader.state_dict())
    assert sum(len(batch["index"]) for _, batch in resumed) == len(every_index(resumed.dataset)) - 20
    assert resumed.dataset.figures(0, 4)["resume_fast_forward_s"] > 0


def test_frames_are_decoded_as_samples_leave_the_pool(video_root, monkeypatch):
    root = video_root
    ds = pool(root, episode_pool_size=2, decode_budget=0)
    queried = []
    original = ds.decoder.decode

    def decode(source, requests):
        queried.extend(len(r.timestamps) for r in requests)
        return original(source, requests)

    monkeypatch.setattr(ds.decoder, "decode", decode)
    iterator = iter(ds)
    for n in range(1, 6):
        sample = next(iterator)
        assert queried == [1] * n  # one frame for this sample, nothing ahead of it
        assert read_frame_code(sample[CAM0]) == (sample["index"].item(), 0)


def test_episodes_admitted_summed_over_workers(dataset_factory):
    root = dataset_factory(**TABULAR)
    ds = pool(root, episode_pool_size=2)
    consume(ds, 2)
    assert ds.figures(2, 3)["episodes_admitted"] == 7


@pytest.mark.parametrize(("pool_size", "wanted"), [(3, 6), (200, 12)])
def test_the_pool_says_how_many_files_it_reads_in_turn_and_the_host_keeps_them_open(small_dataset, pool_size,
                                                                                       wanted):
    ds = pool(small_dataset, episode_pool_size=pool_size)  # 6 episodes, 2 cameras
    assert len(ds.meta.video_keys) == 2
    assert ds.open_files_wanted() == (wanted, f"episode_pool_size {pool_size}: {wanted // 2} open episodes x "
                                              "2 camera(s)")
    assert ds.decoder.cache.capacity == 64, "the decoder's default already holds them: the host changes nothing"


# ---------------------------------------------------------------------------------------- options


@pytest.mark.parametrize(("options", "match"), [
    (dict(episode_pool_sz=4), "episode_pool_sz"),
    (dict(shuffle=True), "shuffle"),
    (dict(episode_pool_size=0), "episode_pool_size"),
    (dict(episode_pool_size=-3), "episode_pool_size"),
    (dict(rank=1), "both"),
    (dict(rank=2, world_size=2), "outside"),
])
def test_bad_options(dataset_factory, options, match):
    root = dataset_factory(**TABULAR)
    with pytest.raises(DlError, match=match):
        pool(root, **options)
