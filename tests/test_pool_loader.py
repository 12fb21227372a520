"""Tests for the `pool` loader (plugins/pool_loader.py) and the pieces it is built from (dl.episode_pool,
dl.partition, dl.resume): exactly-once coverage over ranks x DataLoader workers, uneven splits, per-seed
determinism and epoch reshuffles, exact mid-epoch resume, value parity with the `map` loader, uniform
admission, shuffle quality, tabular-only pool memory and option checking."""

import json
import math
import random
import warnings
from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import torch.utils.data
from torch.utils.data import default_collate

import dl
from dl.episode_pool import EpisodePool
from dl.errors import DlError, ResumeError
from dl.resume import resume_point
from dl.sample_dataset import camera_key, read_frame_code

FPS = 30
CAM0 = camera_key(0)
# tabular only (no video), 7 episodes of uneven length: fast, and splits are uneven
TABULAR = dict(episodes=7, frames_per_episode=(5, 15), cameras=0, episodes_per_file=3)
# one camera, for resume (frames compared sample by sample) and pool memory figures
VIDEO = dict(episodes=5, frames_per_episode=(10, 30), cameras=1, codec="h264", gop=4, episodes_per_file=3)
# every episode in one file and one row group ("collapsed"): 64 episodes x 80 rows = 5120 rows, more than
# the 4096-row batches dl.tabular streams, so an early episode can be read without reading the whole file
COLLAPSED = dict(episodes=64, frames_per_episode=(80, 80), cameras=0, episodes_per_file=64, row_group_size=None)
TABULAR_BYTES_PER_FRAME = 6 * 4 + 6 * 4 + 4 + 4 * 8  # state, action (float32 x 6), timestamp, four int64

# 3 DataLoader workers on a 2-core machine are intended here
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create .* worker processes")


@pytest.fixture
def video_root(dataset_factory):
    """The VIDEO dataset. torchcodec is imported here, in the main process, so forked DataLoader workers
    inherit it instead of importing it each (~2 s apiece on this machine)."""
    import torchcodec.decoders  # noqa: F401

    return dataset_factory(**VIDEO)


@pytest.fixture
def persistent_loaders():
    """A list to put loaders with persistent workers in; their workers are shut down after the test (an
    xfailed test's traceback would otherwise keep them alive until the session ends)."""
    loaders = []
    yield loaders
    for loader in loaders:
        iterator = getattr(loader, "_iterator", None)
        if iterator is not None and hasattr(iterator, "_shutdown_workers"):
            iterator._shutdown_workers()


def pool(root, *, seed=0, episodes=None, delta_timestamps=None, image_dtype="uint8", **options):
    return dl.make_dataset(str(root), loader="pool", seed=seed, episodes=episodes,
                           delta_timestamps=delta_timestamps, image_dtype=image_dtype, options=options)


def tagged(samples):
    """collate_fn that also says which DataLoader worker built the batch (0 in the main process)."""
    info = torch.utils.data.get_worker_info()
    return (0 if info is None else info.id), default_collate(samples)


def every_index(ds):
    """The global `index` of every frame of the dataset's selected episodes."""
    return [i for ep in ds.episodes for i in range(ep.dataset_from_index, ep.dataset_to_index)]


def consume(ds, num_workers, batch_size=3):
    """[(worker, batch)] of one pass of a plain DataLoader; batch is the collated dict."""
    return list(torch.utils.data.DataLoader(ds, batch_size=batch_size, num_workers=num_workers, collate_fn=tagged))


def consume_loader(loader):
    return list(loader)


def index_batches(tagged_batches):
    return [batch["index"].tolist() for _, batch in tagged_batches]


def flat(batches):
    return [i for b in batches for i in b]


def run_ranks(root, world_size, num_workers, batch_size=3, **options):
    """Iterate every rank of a world in this process: {(rank, worker): [(index, episode_index)]}, and
    the warnings each rank's iteration raised (only the main process's: num_workers=0 shows them all)."""
    out, warned = {}, {}
    for rank in range(world_size):
        ds = pool(root, rank=rank, world_size=world_size, **options)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            batches = consume(ds, num_workers, batch_size)
        warned[rank] = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        for worker in range(max(num_workers, 1)):
            out[(rank, worker)] = []
        for worker, batch in batches:
            out[(rank, worker)] += list(zip(batch["index"].tolist(), batch["episode_index"].tolist(), strict=True))
    return out, warned


def check_exactly_once(ds, per_consumer):
    indices = [i for samples in per_consumer.values() for i, _ in samples]
    assert Counter(indices) == Counter(every_index(ds))
    episodes = {c: {e for _, e in samples} for c, samples in per_consumer.items()}
    consumers = list(episodes)
    for a in range(len(consumers)):
        for b in range(a + 1, len(consumers)):
            assert not episodes[consumers[a]] & episodes[consumers[b]], (consumers[a], consumers[b])
    return episodes


# ------------------------------------------------------------------------------------ coverage


@pytest.mark.parametrize("num_workers", [0, 1, 2])
@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_exactly_once_over_ranks_and_workers(dataset_factory, world_size, num_workers):
    root = dataset_factory(**TABULAR)
    ds = pool(root)
    per_consumer, _ = run_ranks(root, world_size, num_workers, episode_pool_size=2)
    assert len(per_consumer) == world_size * max(num_workers, 1)
    episodes = check_exactly_once(ds, per_consumer)
    per_rank = [set().union(*(e for (r, _), e in episodes.items() if r == rank)) for rank in range(world_size)]
    for a in range(world_size):
        for b in range(a + 1, world_size):
            assert not per_rank[a] & per_rank[b]
    # balanced: consumers' frame counts differ by at most the longest episode
    lengths = {ep.index: ep.length for ep in ds.episodes}
    frames = [len(samples) for samples in per_consumer.values()]
    assert max(frames) - min(frames) <= max(lengths.values())
    # an episode is emitted whole by the one consumer that owns it
    for samples in per_consumer.values():
        counts = Counter(e for _, e in samples)
        assert all(counts[e] == lengths[e] for e in counts)


def test_more_consumers_than_episodes_warns_and_still_covers(dataset_factory):
    root = dataset_factory(**TABULAR)
    ds = pool(root, episodes=[0, 1])
    per_consumer, warned = run_ranks(root, 3, 0, episodes=[0, 1], episode_pool_size=2)
    check_exactly_once(ds, per_consumer)
    empty = {rank for (rank, _), samples in per_consumer.items() if not samples}
    assert len(empty) == 1
    for rank, messages in warned.items():
        owns_none = [m for m in messages if "owns no episodes" in m]
        if rank in empty:
            assert len(owns_none) == 1 and f"rank {rank} worker 0" in owns_none[0]
        else:
            assert not owns_none, rank
    (rank,) = empty
    with pytest.warns(UserWarning, match="owns no episodes"):
        assert list(pool(root, episodes=[0, 1], rank=rank, world_size=3)) == []
    # 4 consumers (2 ranks x 2 workers) for 3 episodes: one worker idles, coverage still exact
    per_consumer, _ = run_ranks(root, 2, 2, episodes=[0, 1, 2], episode_pool_size=2)
    check_exactly_once(pool(root, episodes=[0, 1, 2]), per_consumer)
    assert sum(1 for samples in per_consumer.values() if not samples) == 1


def test_uneven_ranks_warn_about_drop_last(dataset_factory):
    root = dataset_factory(**TABULAR)
    per_consumer, warned = run_ranks(root, 2, 0, episode_pool_size=2)
    totals = [len(per_consumer[(rank, 0)]) for rank in range(2)]
    assert totals[0] != totals[1]  # precondition: this dataset splits unevenly over 2 ranks
    assert any("drop_last" in m for m in warned[0])
    with pytest.warns(UserWarning, match="drop_last"):
        list(pool(root, rank=0, world_size=2))
    _, warned = run_ranks(root, 2, 0, episode_pool_size=2, drop_last=True)
    assert not any("drop_last" in m for messages in warned.values() for m in messages)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_drop_last_truncates_every_consumer_to_the_smallest(dataset_factory, num_workers):
    root = dataset_factory(**TABULAR)
    full, _ = run_ranks(root, 2, num_workers, episode_pool_size=2)
    smallest = min(len(samples) for samples in full.values())
    assert smallest > 0 and len({len(samples) for samples in full.values()}) > 1  # uneven to begin with
    dropped, _ = run_ranks(root, 2, num_workers, episode_pool_size=2, drop_last=True)
    assert set(dropped) == set(full)
    for consumer, samples in dropped.items():
        assert len(samples) == smallest, consumer
        assert samples == full[consumer][:smallest]  # the same stream, cut short
    rank_totals = [sum(len(s) for (r, _), s in dropped.items() if r == rank) for rank in range(2)]
    assert rank_totals[0] == rank_totals[1] == smallest * max(num_workers, 1)
    indices = [i for samples in dropped.values() for i, _ in samples]
    assert len(set(indices)) == len(indices)


# ---------------------------------------------------------------------------- determinism, epochs


def test_same_seed_same_order_other_seed_differs(dataset_factory):
    root = dataset_factory(**TABULAR)
    runs = {seed: index_batches(consume(pool(root, seed=seed, episode_pool_size=2), 2)) for seed in (5, 6)}
    again = index_batches(consume(pool(root, seed=5, episode_pool_size=2), 2))
    assert again == runs[5]
    assert runs[5] != runs[6]
    assert sorted(flat(runs[5])) == sorted(flat(runs[6])) == sorted(every_index(pool(root)))


def test_epochs_reshuffle_with_a_plain_dataloader(dataset_factory):
    root = dataset_factory(**TABULAR)
    ds = pool(root, seed=1, episode_pool_size=2)
    loader = torch.utils.data.DataLoader(ds, batch_size=3, num_workers=0)
    epochs = [flat(b["index"].tolist() for b in loader) for _ in range(3)]
    assert ds.epoch == 3  # iter() advances the epoch in the iterating process
    assert epochs[0] != epochs[1] != epochs[2] != epochs[0]
    assert sorted(epochs[0]) == sorted(epochs[1]) == sorted(epochs[2]) == every_index(ds)
    for epoch in (1, 2):  # set_epoch reproduces any epoch
        again = pool(root, seed=1, episode_pool_size=2)
        again.set_epoch(epoch)
        assert [s["index"].item() for s in again] == epochs[epoch]


def test_epochs_reshuffle_with_resumable_loader_and_workers(dataset_factory):
    root = dataset_factory(**TABULAR)
    ds = pool(root, seed=1, episode_pool_size=2)
    loader = dl.ResumableDataLoader(ds, batch_size=3, num_workers=2, collate_fn=tagged)
    epochs = [index_batches(consume_loader(loader)) for _ in range(2)]
    assert loader.state_dict()["epoch"] == 1 and ds.epoch == 2
    assert flat(epochs[0]) != flat(epochs[1])
    assert sorted(flat(epochs[0])) == sorted(flat(epochs[1])) == every_index(ds)
    again = pool(root, seed=1, episode_pool_size=2)
    again.set_epoch(1)
    assert index_batches(consume(again, 2)) == epochs[1]


# --------------------------------------------------------------------------------------- resume


def resumable(root, num_workers, batch_size, **kwargs):
    ds = pool(root, **kwargs)
    return dl.ResumableDataLoader(ds, batch_size=batch_size, num_workers=num_workers, collate_fn=tagged)


def assert_same_batches(got, expected):
    assert len(got) == len(expected)
    for n, ((_, a), (_, b)) in enumerate(zip(got, expected, strict=True)):
        assert a["index"].tolist() == b["index"].tolist(), n
        assert set(a) == set(b)
        for key, value in a.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(value, b[key]), (n, key)
            else:
                assert value == b[key], (n, key)
        if CAM0 in a:
            assert [read_frame_code(f) for f in a[CAM0]] == [(i, 0) for i in a["index"].tolist()], n


def cut_and_resume(root, num_workers, batch_size, cut, **kwargs):
    """(uninterrupted batches, state after `cut` batches, batches of a NEW loader resumed from it)."""
    full = consume_loader(resumable(root, num_workers, batch_size, **kwargs))
    loader = resumable(root, num_workers, batch_size, **kwargs)
    head = []
    for batch in loader:
        head.append(batch)
        if len(head) == cut:
            break
    state = loader.state_dict()
    assert_same_batches(head, full[:cut])
    resumed = resumable(root, num_workers, batch_size, **kwargs)
    resumed.load_state_dict(state)
    return full, state, consume_loader(resumed)


def first_exhaustion(batches):
    """Position just after the batch with which the first worker ran out (from a tagged uninterrupted run)."""
    last = {}
    for n, (worker, _) in enumerate(batches):
        last[worker] = n
    return min(last.values()) + 1


@pytest.mark.parametrize(("num_workers", "cut"), [(0, 5), (2, 1), (2, 7), (3, 5)])
def test_exact_resume_mid_epoch(video_root, num_workers, cut):
    root = video_root
    full, state, tail = cut_and_resume(root, num_workers, 4, cut, episode_pool_size=2, seed=3)
    assert 0 < cut < len(full)
    assert state["epoch"] == 0 and state["batches_consumed"] == cut
    assert_same_batches(tail, full[cut:])


@pytest.mark.slow
@pytest.mark.parametrize("num_workers", [2, 3])
def test_exact_resume_after_a_worker_ran_out(video_root, num_workers):
    root = video_root
    full = consume_loader(resumable(root, num_workers, 4, episode_pool_size=2, seed=3))
    counts = Counter(worker for worker, _ in full)
    assert len(set(counts.values())) > 1  # precondition: uneven worker batch counts
    cut = first_exhaustion(full) + 1
    assert cut < len(full)  # precondition: some worker is exhausted before the cut, others are not
    _, state, tail = cut_and_resume(root, num_workers, 4, cut, episode_pool_size=2, seed=3)
    assert state["batches_consumed"] == cut
    assert_same_batches(tail, full[cut:])


def test_exact_resume_with_an_idle_worker(video_root):
    """2 episodes for 3 workers: one worker has nothing at all this epoch."""
    root = video_root
    full, _, tail = cut_and_resume(root, 3, 4, 3, episodes=[0, 1], episode_pool_size=1, seed=2)
    assert len({worker for worker, _ in full}) == 2
    assert_same_batches(tail, full[3:])


def test_resume_same_state_serves_every_rank(video_root):
    root = video_root
    options = dict(episode_pool_size=2, seed=4, world_size=2)
    full = {rank: consume_loader(resumable(root, 2, 3, rank=rank, **options)) for rank in range(2)}
    cut = 4
    _, state, _ = cut_and_resume(root, 2, 3, cut, rank=0, **options)
    for rank in range(2):
        assert full[rank][cut:]  # both ranks still have batches after the cut
        loader = resumable(root, 2, 3, rank=rank, **options)
        loader.load_state_dict(state)
        assert_same_batches(consume_loader(loader), full[rank][cut:])


def test_state_dict_holds_counters_only(dataset_factory):
    root = dataset_factory(**TABULAR)
    loader = resumable(root, 0, 4, episode_pool_size=2)
    iterator = iter(loader)
    next(iterator)
    next(iterator)
    state = loader.state_dict()
    assert set(state) == {"epoch", "batches_consumed", "batch_size", "config_hash"}
    assert (state["epoch"], state["batches_consumed"], state["batch_size"]) == (0, 2, 4)
    assert isinstance(state["config_hash"], str)
    assert json.loads(json.dumps(state)) == state


@pytest.mark.parametrize("change", [
    dict(episode_pool_size=3), dict(num_workers=1), dict(world_size=2, rank=0), dict(episodes=[0, 1, 2, 3]),
    dict(seed=1), dict(batch_size=5), dict(drop_last=True),
], ids=["pool_size", "num_workers", "world_size", "episodes", "seed", "batch_size", "drop_last"])
def test_resume_refuses_a_changed_configuration(dataset_factory, change):
    root = dataset_factory(**TABULAR)
    base = dict(num_workers=2, batch_size=4, episode_pool_size=2, seed=0, episodes=None)
    saved = resumable(root, **base)
    iterator = iter(saved)
    next(iterator)
    state = saved.state_dict()
    resumable(root, **base).load_state_dict(state)  # the same configuration is accepted
    with pytest.raises(ResumeError, match="does not match"):
        resumable(root, **{**base, **change}).load_state_dict(state)


def test_resume_accepts_another_rank_of_the_same_world(dataset_factory):
    root = dataset_factory(**TABULAR)
    state = resumable(root, 2, 4, rank=0, world_size=2).state_dict()
    resumable(root, 2, 4, rank=1, world_size=2).load_state_dict(state)


@pytest.mark.parametrize(("num_workers", "persistent"), [
    (0, False),
    (2, False),
    (2, True),
], ids=["main-process", "workers", "persistent-workers"])
def test_epoch_after_a_resumed_epoch_is_whole(dataset_factory, persistent_loaders, num_workers, persistent):
    root = dataset_factory(**TABULAR)

    def loader():
        made = dl.ResumableDataLoader(pool(root, episode_pool_size=2), batch_size=4, num_workers=num_workers,
                                      collate_fn=tagged, persistent_workers=persistent)
        persistent_loaders.append(made)
        return made

    reference = loader()
    epochs = [consume_loader(reference) for _ in range(2)]
    cut = loader()
    for n, _ in enumerate(cut, 1):
        if n == 3:
            break
    resumed = loader()
    resumed.load_state_dict(cut.state_dict())
    assert_same_batches(consume_loader(resumed), epochs[0][3:])
    assert resumed.state_dict()["batches_consumed"] == len(epochs[0])
    next_epoch = consume_loader(resumed)  # epoch 1, from its start
    assert resumed.state_dict()["epoch"] == 1
    assert_same_batches(next_epoch, epochs[1])
    assert resumed.state_dict()["batches_consumed"] == len(epochs[1])


def simulate_dataloader(batch_size, worker_samples):
    """The worker of each batch a DataLoader delivers from an IterableDataset: workers cycled in order,
    exhausted workers skipped; a worker's last batch holds its remainder."""
    left = [math.ceil(n / batch_size) for n in worker_samples]
    order = []
    while any(left):
        for w in range(len(left)):
            if left[w]:
                order.append(w)
                left[w] -= 1
    return order


def test_resume_point_matches_a_brute_force_dataloader():
    rng = random.Random(0)
    for _ in range(400):
        num_workers = rng.randint(1, 5)
        samples = [rng.choice([0, rng.randint(1, 9), rng.randint(1, 60)]) for _ in range(num_workers)]
        batch_size = rng.randint(1, 8)
        order = simulate_dataloader(batch_size, samples)
        for cut in range(len(order) + 1):
            produced, next_worker = resume_point(cut, batch_size, samples)
            taken = Counter(order[:cut])
            assert produced == [min(taken[w] * batch_size, n) for w, n in enumerate(samples)], (samples, cut)
            assert 0 <= next_worker < num_workers
            # a resumed DataLoader starts its cycle at resumed worker 0, who plays worker `next_worker`:
            # its order (exhausted workers skipped) must be the rest of the uninterrupted order
            left = [n - p for n, p in zip(samples, produced, strict=True)]
            roles = [(i + next_worker) % num_workers for i in range(num_workers)]
            resumed = [roles[i] for i in simulate_dataloader(batch_size, [left[r] for r in roles])]
            assert resumed == order[cut:], (samples, batch_size, cut, next_worker)
            if cut < len(order):  # the first live worker from next_worker on is the one delivering next
                live = [(next_worker + j) % num_workers for j in range(num_workers)]
                assert next(w for w in live if left[w]) == order[cut]
        with pytest.raises(ResumeError):
            resume_point(len(order) + 1, batch_size, samples)


def test_resume_point_spelled_out():
    # 2 workers, batches of 4: worker 0 has 2 batches (8 samples), worker 1 has 4 (13 samples, last of 1)
    assert resume_point(0, 4, [8, 13]) == ([0, 0], 0)
    assert resume_point(3, 4, [8, 13]) == ([8, 4], 1)
    assert resume_point(4, 4, [8, 13]) == ([8, 8], 0)  # worker 0 is done: a resumed worker 0 plays it
    assert resume_point(6, 4, [8, 13]) == ([8, 13], 0)


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
        if columns is None or set(columns) != {"episode_index"}:
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
    stats = ds.benchmark_stats(0, 4)
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
    assert resumed.dataset.benchmark_stats(0, 4)["resume_fast_forward_s"] > 0


def test_frames_are_decoded_as_samples_leave_the_pool(video_root, monkeypatch):
    root = video_root
    ds = pool(root, episode_pool_size=2)
    queried = []
    original = ds.decoder.frames_at

    def frames_at(source, path, timestamps):
        queried.append(len(timestamps))
        return original(source, path, timestamps)

    monkeypatch.setattr(ds.decoder, "frames_at", frames_at)
    iterator = iter(ds)
    for n in range(1, 6):
        sample = next(iterator)
        assert queried == [1] * n  # one frame for this sample, nothing ahead of it
        assert read_frame_code(sample[CAM0]) == (sample["index"].item(), 0)


def test_episodes_admitted_summed_over_workers(dataset_factory):
    root = dataset_factory(**TABULAR)
    ds = pool(root, episode_pool_size=2)
    consume(ds, 2)
    assert ds.benchmark_stats(2, 3)["episodes_admitted"] == 7


@pytest.mark.parametrize(("pool_size", "capacity"), [(3, 6), (200, 256)])
def test_decoder_cache_fits_the_pool(small_dataset, pool_size, capacity):
    ds = pool(small_dataset, episode_pool_size=pool_size)
    assert len(ds.meta.video_keys) == 2
    assert ds.decoder.cache.capacity == capacity


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
