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


class RowsLeft:
    """Per episode of a consumer (same order as its positions), the rows an elastic segment still has to emit:
    computed from the epoch's mask of frames left when the consumer admits the episode, so a plan never holds
    an array per episode."""

    def __init__(self, left: np.ndarray, starts: np.ndarray, episodes: np.ndarray):
        self.left, self.starts, self.episodes = left, starts, episodes

    def __len__(self) -> int:
        return len(self.episodes)

    def __getitem__(self, i: int) -> np.ndarray:
        e = int(self.episodes[i])
        return np.flatnonzero(self.left[self.starts[e]:self.starts[e + 1]])


@dataclass
class SegmentPlan:
    """What every consumer (rank-major: `rank * num_workers + worker`) streams in one segment of an epoch.

    Attributes:
        index: the segment's position in the epoch (0: the epoch's first shape, the usual case).
        num_workers: consumers per rank.
        episodes: per consumer, its episode positions.
        counts: per consumer, the samples it emits (drop_last applied).
        left: later segments: bool [frames], the epoch's frames not yet emitted (episode e's rows are
            `starts[e]:starts[e + 1]`); None in segment 0 (every row).
        starts: int64 [E + 1], each episode's first frame in `left`, and the total.
        frames_left: int64 [E], frames of each episode this segment emits.
    """

    index: int
    num_workers: int
    episodes: list[np.ndarray]
    counts: list[int]
    left: np.ndarray | None = None
    starts: np.ndarray | None = None
    frames_left: np.ndarray | None = None

    def pool(self, consumer: int, lengths: np.ndarray, order: PoolOrder, seed: int,
             epoch: int) -> EpisodePool | ChunkPool:
        """The consumer's emission order (segment 0: the pool loader's usual order for (seed, epoch, rank,
        worker); later segments: their own generators)."""
        rank, worker = divmod(consumer, self.num_workers)
        owned = self.episodes[consumer]
        if self.left is None:
            return order.make(owned, lengths[owned], epoch_rng(seed, epoch, POOL, rank, worker))
        rng = epoch_rng(seed, epoch, ELASTIC, self.index, rank, worker)
        return order.make(owned, self.frames_left[owned], rng, RowsLeft(self.left, self.starts, owned))


def _counts(frames: list[int], drop_last: bool) -> list[int]:
    return [min(frames)] * len(frames) if drop_last and frames else frames


def first_plan(lengths: np.ndarray, world_size: int, num_workers: int, seed: int, epoch: int,
               drop_last: bool) -> SegmentPlan:
    """Segment 0: every episode whole, dealt by `partition_episodes`."""
    parts = partition_episodes(lengths, world_size * num_workers, seed, epoch)
    return SegmentPlan(0, num_workers, parts, _counts([int(lengths[p].sum()) for p in parts], drop_last))


def later_plan(index: int, left: np.ndarray, starts: np.ndarray, world_size: int, num_workers: int, seed: int,
               epoch: int, drop_last: bool) -> SegmentPlan:
    """Segment `index` > 0: what is left of each episode (`left`: the epoch's frames not yet emitted, episode e
    at `starts[e]:starts[e + 1]`) dealt to world_size x num_workers consumers, balanced by frames left, in an
    order drawn for (seed, epoch, index)."""
    done = np.concatenate([[0], np.cumsum(left, dtype=np.int64)])
    frames_left = done[starts[1:]] - done[starts[:-1]]
    pieces = np.flatnonzero(frames_left)
    parts = deal_balanced(frames_left[pieces], world_size * num_workers, epoch_rng(seed, epoch, ELASTIC, index))
    episodes = [pieces[p] for p in parts]
    counts = _counts([int(frames_left[e].sum()) for e in episodes], drop_last)
    return SegmentPlan(index, num_workers, episodes, counts, left, starts, frames_left)


def emitted(plan: SegmentPlan, segment: Segment, lengths: np.ndarray, order: PoolOrder, seed: int,
            epoch: int, starts: np.ndarray) -> np.ndarray:
    """The frames (positions into the epoch's frames, episode e's rows at `starts[e]:...`) the consumers had
    emitted when `segment` (of `plan`'s shape) ended: every consumer's order replayed to the count
    `dl.dataloader.resume.resume_point` gives for its rank's batches."""
    out: list[int] = []
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
                out.append(int(starts[e]) + row)
    return np.asarray(out, dtype=np.int64)


def current_plan(lengths: np.ndarray, segments: tuple[Segment, ...], world_size: int, num_workers: int,
                 order: PoolOrder, seed: int, epoch: int, drop_last: bool) -> SegmentPlan:
    """The plan of the current segment, after the ended `segments` of this epoch (none: segment 0)."""
    shapes = [_shape(s) for s in segments] + [(world_size, num_workers)]
    plan = first_plan(lengths, *shapes[0], seed, epoch, drop_last)
    if not segments:
        return plan
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    left = np.ones(int(starts[-1]), dtype=bool)
    for index, segment in enumerate(segments, 1):
        left[emitted(plan, segment, lengths, order, seed, epoch, starts)] = False
        plan = later_plan(index, left, starts, *shapes[index], seed, epoch, drop_last)
    return plan


def _shape(segment: Segment) -> tuple[int, int]:
    return segment.shape["world_size"], segment.shape["num_workers"]
