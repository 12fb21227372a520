"""The pool loader's split: exactly-once coverage over ranks x DataLoader workers, uneven splits and
drop_last, per-seed determinism and epoch reshuffles."""

from collections import Counter

import pytest
import torch
import torch.utils.data
from pool_helpers import (
    TABULAR,
    check_exactly_once,
    consume,
    consume_loader,
    every_index,
    flat,
    index_batches,
    pool,
    run_ranks,
    tagged,
)

import dl

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
    assert (loader.state_dict()["epoch"], loader.state_dict()["batches_consumed"], ds.epoch) == (2, 0, 2)
    assert flat(epochs[0]) != flat(epochs[1])
    assert sorted(flat(epochs[0])) == sorted(flat(epochs[1])) == every_index(ds)
    again = pool(root, seed=1, episode_pool_size=2)
    again.set_epoch(1)
    assert index_batches(consume(again, 2)) == epochs[1]
