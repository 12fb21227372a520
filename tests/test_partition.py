"""The pool's partition (`dl.plugins.pool.partition`): episodes dealt to consumers in numpy, each to exactly one,
frames balanced within one episode's length, no consumer left out while episodes remain; and the map
sampler's order (`dl.plugins.map.sampler`): the same permutation as `rng.permutation(length)`, held as int32
and handed out a chunk at a time."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

import dl
from dl.contracts.errors import ResumeError
from dl.dataloader.seeding import SHUFFLE, epoch_rng
from dl.plugins.map.sampler import EpochSampler
from dl.plugins.pool.partition import deal_balanced, partition_episodes

SETTINGS = settings(max_examples=examples(200), deadline=None, derandomize=True, database=None)


@SETTINGS
@given(lengths=st.lists(st.integers(1, 60), max_size=80), consumers=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_every_episode_to_one_consumer_balanced(lengths, consumers, seed):
    lengths = np.array(lengths, dtype=np.int64)
    parts = deal_balanced(lengths, consumers, np.random.default_rng(seed))
    assert len(parts) == consumers and all(p.dtype == np.int64 for p in parts)
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(lengths)))
    served = min(len(lengths), consumers)
    assert all(len(p) for p in parts[:served]) and not any(len(p) for p in parts[served:])
    if len(lengths) >= consumers:  # each consumer within one episode of the fair share
        frames = np.array([lengths[p].sum() for p in parts])
        assert np.all(np.abs(frames - lengths.sum() / consumers) <= lengths.max())


def test_the_partition_is_a_function_of_seed_and_epoch():
    lengths = np.arange(1, 200)
    first = partition_episodes(lengths, 4, seed=3, epoch=1)
    assert all(np.array_equal(a, b) for a, b in zip(first, partition_episodes(lengths, 4, 3, 1), strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(first, partition_episodes(lengths, 4, 3, 2), strict=True))


@SETTINGS
@given(length=st.integers(0, 5000), rank=st.integers(0, 2), seed=st.integers(0, 2**16), epoch=st.integers(0, 3))
def test_map_order_is_the_seeded_permutation(length, rank, seed, epoch):
    sampler = EpochSampler(length, rank, 3, seed)
    sampler.epoch = epoch
    expected = epoch_rng(seed, epoch, SHUFFLE).permutation(length)[rank::3]
    assert sampler.order(epoch).dtype == np.int32
    assert list(iter(sampler)) == expected.tolist()


def test_a_pool_state_saved_under_the_former_dealing_is_refused(dataset_factory):
    """States from before this partition replay other consumers' orders: refused, naming why."""
    root = str(dataset_factory(episodes=5, frames_per_episode=(4, 8), cameras=0, episodes_per_file=5))
    loader = dl.make_dataloader(dl.make_dataset(root, loader="pool"), batch_size=4)
    next(iter(loader))
    state = loader.state_dict()
    state["invariants"].pop("dealing")
    fresh = dl.make_dataloader(dl.make_dataset(root, loader="pool"), batch_size=4)
    with pytest.raises(ResumeError, match="dealing: saved None, now 'shuffled order cut at equal frame shares'"):
        fresh.load_state_dict(state)
