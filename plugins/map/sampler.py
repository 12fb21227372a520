"""The `map` loader's order: each epoch a seeded permutation of every position, dealt to ranks; after an
elastic resume, what the earlier shapes left of it, dealt to the new ranks."""

import numpy as np
import torch.utils.data

from dl.contracts.resume import Segment
from dl.dataloader.seeding import SHUFFLE, epoch_rng


class EpochSampler(torch.utils.data.Sampler):
    """Positions of one rank's share of each epoch, in a shuffled order (a torch Sampler of ints).

    Epoch `e` permutes `range(length)` with `epoch_rng(seed, e, SHUFFLE)`; rank `r` of `world_size` takes
    every `world_size`-th element from `r`, so ranks are disjoint and together cover every position
    exactly once (shares differ by at most one; unlike torch's `DistributedSampler`, nothing is padded or
    dropped). `iter()` reads `epoch` and then moves it on, so each iteration is the next epoch.

    A pending resume (`position`, a `dl.dataloader.elastic.ResumePosition`) skips what this rank already consumed.
    After a resume in another shape, the epoch's order is replayed: each ended segment's ranks had
    consumed the first `batches x batch_size` positions of their share; what is left keeps the epoch's
    order and is dealt to the current ranks the same strided way, so the rest of the epoch is served
    exactly once with the torchdata-StatefulDataLoader-like state "epoch + position", made elastic.

    Args:
        length: positions in the dataset.
        rank, world_size: this process's place.
        seed: >= 0.
    """

    def __init__(self, length: int, rank: int, world_size: int, seed: int):
        self.length, self.rank, self.world_size, self.seed = length, rank, world_size, seed
        self.epoch, self.position = 0, None

    def order(self, epoch: int, segments: tuple[Segment, ...] = ()) -> np.ndarray:
        """Positions (int32, or int64 past 2**31 frames) of this rank's share of `epoch` (after the ended
        `segments`), in delivery order."""
        left = _permutation(epoch_rng(self.seed, epoch, SHUFFLE), self.length)
        for segment in segments:
            left = left[~_consumed_mask(len(left), segment)]
        return left[self.rank::self.world_size]

    def __iter__(self):
        epoch, position = self.epoch, self.position
        self.epoch, self.position = epoch + 1, None
        if position is None:
            return _ints(self.order(epoch))
        share = self.order(epoch, position.segments)
        skip = len(share) if position.batches is None else position.batches * position.batch_size
        return _ints(share[skip:])

    def __len__(self) -> int:
        """Positions the next `iter()` yields: this rank's share of the epoch, less what a pending resume
        skips (counted from the segments' counters, without drawing the order)."""
        if self.position is None:
            return len(range(self.rank, self.length, self.world_size))
        left = self.length
        for segment in self.position.segments:
            left -= _consumed(left, segment)
        share = len(range(self.rank, left, self.world_size))
        batches = self.position.batches
        return 0 if batches is None else max(share - batches * self.position.batch_size, 0)


def _permutation(rng: np.random.Generator, length: int) -> np.ndarray:
    """`rng.permutation(length)` (the same order), as int32 when the positions fit: half the memory on
    datasets of tens of millions of frames."""
    return rng.permutation(np.arange(length, dtype=np.int32 if length < 2**31 else np.int64))


def _ints(positions: np.ndarray, chunk: int = 1 << 16):
    """The positions as Python ints, converted a chunk at a time (never a list of every frame)."""
    for start in range(0, len(positions), chunk):
        yield from positions[start:start + chunk].tolist()


def _consumed(length: int, segment: Segment) -> int:
    """How many of `length` positions the ranks of `segment` had consumed (the count of `_consumed_mask`)."""
    world_size, batch_size = segment.shape["world_size"], segment.shape["batch_size"]
    shares = [len(range(rank, length, world_size)) for rank in range(world_size)]
    consumed = zip(shares, segment.batches_consumed, strict=True)
    return sum(n if b is None else min(b * batch_size, n) for n, b in consumed)


def _consumed_mask(length: int, segment: Segment) -> np.ndarray:
    """Which entries of an order of `length` positions the ranks of `segment` had consumed: rank `r`'s
    share is every `world_size`-th entry from `r`, consumed from its start."""
    world_size, batch_size = segment.shape["world_size"], segment.shape["batch_size"]
    mask = np.zeros(length, dtype=bool)
    for rank, batches in enumerate(segment.batches_consumed):
        share = np.arange(rank, length, world_size)
        mask[share if batches is None else share[:batches * batch_size]] = True
    return mask
