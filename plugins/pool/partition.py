"""Splitting episodes among consumers, per epoch: a pure function of (lengths, consumers, seed, epoch)."""

import numpy as np

from dl.dataloader.seeding import PARTITION, epoch_rng


def partition_episodes(lengths: np.ndarray, num_consumers: int, seed: int, epoch: int) -> list[np.ndarray]:
    """Deal episodes to consumers so each owns a disjoint set and frame counts are balanced.

    Episodes are shuffled (same order in every process for a (seed, epoch)), then each goes to the
    consumer holding the fewest frames so far (ties: lowest consumer id). Every episode goes to exactly one
    consumer, so the consumers together cover every frame once.

    Args:
        lengths: int [E], frames per episode (positions 0..E-1 in the selection).
        num_consumers: world_size x num_workers.

    Returns:
        num_consumers int64 arrays of episode positions (a consumer may get none when E < num_consumers).
    """
    return deal_balanced(lengths, num_consumers, epoch_rng(seed, epoch, PARTITION))


def deal_balanced(lengths: np.ndarray, num_consumers: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle items (episodes, or what is left of them) with `rng`, then give each to the consumer holding
    the fewest frames so far (ties: lowest consumer id).

    Args:
        lengths: int [E], frames per item.
        num_consumers: how many consumers share them.
        rng: the generator that orders the items.

    Returns:
        num_consumers int64 arrays of item positions (into `lengths`), each in dealing order.
    """
    order = rng.permutation(len(lengths))
    load = np.zeros(num_consumers, dtype=np.int64)
    owned: list[list[int]] = [[] for _ in range(num_consumers)]
    for e in order:
        c = int(np.argmin(load))
        owned[c].append(int(e))
        load[c] += lengths[e]
    return [np.asarray(o, dtype=np.int64) for o in owned]
