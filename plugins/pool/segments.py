"""The pool's epoch as segments (`dl.dataloader.elastic`): what each consumer streams in a segment, which frames the
consumers of the ended segments emitted (replayed from counters and seeded orders: no reads, no decode),
and how the frames left are dealt to the consumers of the current shape."""

from dataclasses import dataclass

import numpy as np

from dl.contracts.resume import Segment
from dl.dataloader.resume import resume_point
from dl.dataloader.seeding import ELASTIC, POOL, epoch_rng

from .chunk_pool import ChunkPool, PoolOrder
from .episode_pool import EpisodePool
from .partition import deal_balanced, partition_episodes


@dataclass
class SegmentPlan:
    """What every consumer (rank-major: `rank * num_workers + worker`) streams in one segment of an epoch.

    Attributes:
        index: the segment's position in the epoch (0: the epoch's first shape, the usual case).
        num_workers: consumers per rank.
        episodes: per consumer, its episode positions.
        rows: per consumer, per episode, the rows it still has to emit (None: every row, segment 0).
        counts: per consumer, the samples it emits (drop_last applied).
    """

    index: int
    num_workers: int
    episodes: list[np.ndarray]
    rows: list[list[np.ndarray]] | None
    counts: list[int]

    def pool(self, consumer: int, lengths: np.ndarray, order: PoolOrder, seed: int,
             epoch: int) -> EpisodePool | ChunkPool:
        """The consumer's emission order (segment 0: the pool loader's usual order for (seed, epoch, rank,
        worker); later segments: their own generators)."""
        rank, worker = divmod(consumer, self.num_workers)
        owned = self.episodes[consumer]
        if self.rows is None:
            return order.make(owned, lengths[owned], epoch_rng(seed, epoch, POOL, rank, worker))
        rows = self.rows[consumer]
        rng = epoch_rng(seed, epoch, ELASTIC, self.index, rank, worker)
        return order.make(owned, np.array([len(r) for r in rows], dtype=np.int64), rng, rows)


def _counts(frames: list[int], drop_last: bool) -> list[int]:
    return [min(frames)] * len(frames) if drop_last and frames else frames


def first_plan(lengths: np.ndarray, world_size: int, num_workers: int, seed: int, epoch: int,
               drop_last: bool) -> SegmentPlan:
    """Segment 0: every episode whole, dealt by `partition_episodes`."""
    parts = partition_episodes(lengths, world_size * num_workers, seed, epoch)
    return SegmentPlan(0, num_workers, parts, None, _counts([int(lengths[p].sum()) for p in parts], drop_last))


def later_plan(index: int, remainder: dict[int, np.ndarray], world_size: int, num_workers: int, seed: int,
               epoch: int, drop_last: bool) -> SegmentPlan:
    """Segment `index` > 0: what is left of each episode (`remainder`: episode position -> rows) dealt to
    world_size x num_workers consumers, balanced by frames left, in an order drawn for (seed, epoch, index)."""
    pieces = sorted(e for e, rows in remainder.items() if len(rows))
    left = np.array([len(remainder[e]) for e in pieces], dtype=np.int64)
    parts = deal_balanced(left, world_size * num_workers, epoch_rng(seed, epoch, ELASTIC, index))
    episodes = [np.array([pieces[i] for i in p], dtype=np.int64) for p in parts]
    rows = [[remainder[pieces[i]] for i in p] for p in parts]
    return SegmentPlan(index, num_workers, episodes, rows, _counts([int(left[p].sum()) for p in parts], drop_last))


def emitted(plan: SegmentPlan, segment: Segment, lengths: np.ndarray, order: PoolOrder, seed: int,
            epoch: int) -> dict[int, list[int]]:
    """The rows each episode (position) had emitted when `segment` (of `plan`'s shape) ended: every
    consumer's order replayed to the count `dl.dataloader.resume.resume_point` gives for its rank's batches."""
    out: dict[int, list[int]] = {}
    n, batch_size = plan.num_workers, segment.shape["batch_size"]
    for rank, batches in enumerate(segment.batches_consumed):
        counts = plan.counts[rank * n:(rank + 1) * n]
        if batches is None:  # that rank had finished its share
            produced = counts
        else:
            produced, _ = resume_point(batches, batch_size, counts)
        for worker, k in enumerate(produced):
            pool = plan.pool(rank * n + worker, lengths, order, seed, epoch)
            for _ in range(k):
                e, row, _ = next(pool)
                out.setdefault(e, []).append(row)
    return out


def current_plan(lengths: np.ndarray, segments: tuple[Segment, ...], world_size: int, num_workers: int,
                 order: PoolOrder, seed: int, epoch: int, drop_last: bool) -> SegmentPlan:
    """The plan of the current segment, after the ended `segments` of this epoch (none: segment 0)."""
    shapes = [_shape(s) for s in segments] + [(world_size, num_workers)]
    plan = first_plan(lengths, *shapes[0], seed, epoch, drop_last)
    remainder = {e: np.arange(n, dtype=np.int64) for e, n in enumerate(lengths)}
    for index, segment in enumerate(segments, 1):
        for e, rows in emitted(plan, segment, lengths, order, seed, epoch).items():
            remainder[e] = np.setdiff1d(remainder[e], rows, assume_unique=True)
        plan = later_plan(index, remainder, *shapes[index], seed, epoch, drop_last)
    return plan


def _shape(segment: Segment) -> tuple[int, int]:
    return segment.shape["world_size"], segment.shape["num_workers"]
