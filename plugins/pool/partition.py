"""Splitting episodes among consumers, per epoch: a pure function of (lengths, consumers, seed, epoch), in numpy
(a million episodes are dealt in milliseconds)."""

import numpy as np

from dl.dataloader.seeding import PARTITION, epoch_rng

DEALING = "shuffled order cut at equal frame shares"
"""How episodes are dealt (`deal_balanced`), recorded in the pool's resume invariants: a state saved under
another dealing (dl before it, which gave each episode to the least loaded consumer) would replay other
consumers' orders, so it is refused instead of serving frames twice or never."""


def partition_episodes(lengths: np.ndarray, num_consumers: int, seed: int, epoch: int) -> list[np.ndarray]:
    """Deal episodes to consumers so each owns a disjoint set and frame counts are balanced (`deal_balanced`,
    with the same order in every process for a (seed, epoch)). Every episode goes to exactly one consumer, so
    the consumers together cover every frame once.

    Args:
        lengths: int [E], frames per episode (positions 0..E-1 in the selection).
        num_consumers: world_size x num_workers.

    Returns:
        num_consumers int64 arrays of episode positions (a consumer gets none only when E < num_consumers).
    """
    return deal_balanced(lengths, num_consumers, epoch_rng(seed, epoch, PARTITION))


def deal_balanced(lengths: np.ndarray, num_consumers: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle items (episodes, or what is left of them) with `rng` and cut the shuffled order into one run
    per consumer at equal shares of the frames: item k goes to the consumer whose share holds the midpoint of
    its frames in the running total. Each consumer's frames are within one item's length of total /
    consumers (as dealing each item to the least loaded consumer would give), and each of the first
    min(items, consumers) consumers gets at least one item (the cut never skips a consumer, and leaves as
    many items as consumers still to serve). Vectorized: O(items) in numpy, whatever their number.

    Args:
        lengths: int [E], frames per item.
        num_consumers: how many consumers share them.
        rng: the generator that orders the items.

    Returns:
        num_consumers int64 arrays of item positions (into `lengths`), each in the shuffled order.
    """
    n = len(lengths)
    order = rng.permutation(n).astype(np.int64)
    if not n:
        return [order[:0] for _ in range(num_consumers)]
    frames = np.asarray(lengths, dtype=np.float64)[order]
    total = frames.sum()
    middle = np.cumsum(frames) - frames / 2
    share = np.floor(middle * num_consumers / total) if total > 0 else np.zeros(n)
    k = np.arange(n)
    served = min(n, num_consumers)
    share = np.clip(share, np.maximum(0, k - n + served), np.minimum(served - 1, k)).astype(np.int64)
    consumer = k + np.minimum.accumulate(share - k)  # no consumer skipped: each step moves on by at most one
    cuts = np.searchsorted(consumer, np.arange(1, num_consumers))
    return np.split(order, cuts)
