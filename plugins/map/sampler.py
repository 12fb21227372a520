"""The `map` loader's order: each epoch a seeded permutation of every position, dealt to ranks."""

import numpy as np
import torch.utils.data

from dl.seeding import SHUFFLE, epoch_rng


class EpochSampler(torch.utils.data.Sampler):
    """Positions of one rank's share of each epoch, in a shuffled order (a torch Sampler of ints).

    Epoch `e` permutes `range(length)` with `epoch_rng(seed, e, SHUFFLE)`; rank `r` of `world_size` takes
    every `world_size`-th element from `r`, so ranks are disjoint and together cover every position
    exactly once (shares differ by at most one; unlike torch's `DistributedSampler`, nothing is padded or
    dropped). `iter()` reads `epoch` and then moves it on, so each iteration is the next epoch; a pending
    resume skips the first `skip` positions of the rank's share.

    Args:
        length: positions in the dataset.
        rank, world_size: this process's place.
        seed: >= 0.
    """

    def __init__(self, length: int, rank: int, world_size: int, seed: int):
        self.length, self.rank, self.world_size, self.seed = length, rank, world_size, seed
        self.epoch, self.skip = 0, 0

    def order(self, epoch: int) -> np.ndarray:
        """int64 positions of this rank's share of `epoch`, in delivery order."""
        return epoch_rng(self.seed, epoch, SHUFFLE).permutation(self.length)[self.rank::self.world_size]

    def __iter__(self):
        epoch, skip = self.epoch, self.skip
        self.epoch, self.skip = epoch + 1, 0
        return iter(self.order(epoch)[skip:].tolist())

    def __len__(self) -> int:
        return len(range(self.rank, self.length, self.world_size))
