"""A mixture epoch as a plan over the flat world of its consumers: every rank x DataLoader worker (rank-major), each a
consumer of its own of every member (`dl.contracts.loader.ServesConsumers`).

For each member the plan lists the member's epochs ("passes") the mixture epoch reads (`dl.mixture.quotas`) and each
consumer's quota of each: what the pass's quota is, apportioned in proportion to the consumers' shares of that member
epoch, so a whole pass gives every consumer its whole share. A consumer's samples come from its members in a
uniformly random interleave of its quotas, drawn for (seed, epoch, segment, rank, worker): each sample's member is
drawn in proportion to what the consumer has left of each member, and within a member, from its passes in order, each
in the member's own order. Which member each upcoming sample comes from is a pure function of (seed, epoch, counters).

After an elastic resume (`dl.dataloader.elastic`) the ended segments are replayed from counters alone: each ended
consumer's interleave, up to the samples it had produced, says how much it had read of each pass; that becomes a
flat-world segment of the member's epoch (`dl.contracts.resume.consumer_shape`), and what is left of each pass's quota
is apportioned to the consumers of the new shape in proportion to what the member has left for each of them.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..contracts.errors import DlError
from ..contracts.resume import Segment, consumer_shape
from ..dataloader.resume import resume_point
from ..dataloader.seeding import MIXTURE, epoch_rng
from .quotas import apportion, member_epoch, pass_quotas


@dataclass(frozen=True)
class Member:
    """A member as the plan sees it.

    Attributes:
        name: names it in messages and figures.
        loader: its loader (`dl.contracts.loader.ServesConsumers`).
        frames: samples in one of its epochs (every frame of its selected episodes).
        quota: samples it gives one mixture epoch (`dl.mixture.quotas.epoch_quotas`).
    """

    name: str
    loader: Any
    frames: int
    quota: int

    @property
    def passes(self) -> list[int]:
        """What each of its epochs gives one mixture epoch (`dl.mixture.quotas.pass_quotas`)."""
        return pass_quotas(self.quota, self.frames)


@dataclass
class MemberPass:
    """One member epoch as one segment of a mixture epoch reads it.

    Attributes:
        epoch: the member's epoch.
        left: samples of its quota the ended segments of this mixture epoch did not read.
        segments: the member's ended flat-world segments: what those segments read of it.
        quotas: int64 [consumers], what each consumer of this segment reads of it.
    """

    epoch: int
    left: int
    segments: tuple[Segment, ...]
    quotas: np.ndarray


@dataclass
class SegmentPlan:
    """What every consumer of one shape reads in one segment of a mixture epoch.

    Attributes:
        index: the segment's place in the epoch (0: its first shape).
        num_consumers: ranks x DataLoader workers; `num_workers`: per rank.
        passes: per member, its passes (`MemberPass`), in the order they are read.
    """

    index: int
    num_consumers: int
    num_workers: int
    passes: list[list[MemberPass]]

    def totals(self) -> np.ndarray:
        """int64 [members, consumers]: what each consumer reads of each member."""
        out = np.zeros((len(self.passes), self.num_consumers), dtype=np.int64)
        for m, passes in enumerate(self.passes):
            for p in passes:
                out[m] += p.quotas
        return out

    def counts(self) -> list[int]:
        """Samples each consumer produces in this segment."""
        return self.totals().sum(0).tolist()

    def order(self, consumer: int, seed: int, epoch: int) -> np.ndarray:
        """int16 [samples]: the member of each of `consumer`'s samples, in order: a permutation of its quotas drawn
        with `epoch_rng(seed, epoch, MIXTURE, segment, rank, worker)`."""
        rank, worker = divmod(consumer, self.num_workers)
        totals = self.totals()[:, consumer]
        rng = epoch_rng(seed, epoch, MIXTURE, self.index, rank, worker)
        return rng.permutation(np.repeat(np.arange(len(totals), dtype=np.int16), totals))

    def read(self, consumer: int, drawn: np.ndarray) -> list[list[int]]:
        """Per member, per pass, the samples `consumer` has read once it produced `drawn` (a prefix of its order):
        each member's draws fill its passes in order."""
        counts = np.bincount(drawn, minlength=len(self.passes))
        out = []
        for m, passes in enumerate(self.passes):
            k, per_pass = int(counts[m]), []
            for p in passes:
                taken = min(k, int(p.quotas[consumer]))
                per_pass.append(taken)
                k -= taken
            out.append(per_pass)
        return out


def first_plan(members: list[Member], num_consumers: int, num_workers: int, epoch: int) -> SegmentPlan:
    """Segment 0: every pass of every member, each consumer's quota apportioned by its share of the member epoch.

    Raises:
        DlError: a member whose consumers do not read every frame of its epoch (e.g. a `pool` built with
            drop_last=True): the mixture's quotas count every frame.
    """
    passes = []
    for member in members:
        quotas = member.passes
        row = []
        for r, quota in enumerate(quotas):
            j = member_epoch(epoch, len(quotas), r)
            shares = member.loader.consumer_counts(j, num_consumers)
            if sum(shares) != member.frames:
                raise DlError(f"mixture member {member.name}: its consumers read {sum(shares)} of its {member.frames} "
                              f"frames in its epoch {j} ({num_consumers} consumers); a member must serve every frame "
                              "of its epoch (build it without drop_last).")
            row.append(MemberPass(j, quota, (), np.asarray(apportion(quota, shares), dtype=np.int64)))
        passes.append(row)
    return SegmentPlan(0, num_consumers, num_workers, passes)


def emitted(plan: SegmentPlan, segment: Segment, seed: int, epoch: int) -> list[list[np.ndarray]]:
    """Per member, per pass, int64 [consumers of `plan`]: what each consumer had read when `segment` (of `plan`'s
    shape) ended, from the batches each rank had consumed (`dl.dataloader.resume.resume_point`) and the consumers'
    orders; nothing is read or decoded."""
    n, batch_size = plan.num_workers, segment.shape["batch_size"]
    counts = plan.counts()
    out = [[np.zeros(plan.num_consumers, dtype=np.int64) for _ in passes] for passes in plan.passes]
    for rank, batches in enumerate(segment.batches_consumed):
        mine = counts[rank * n:(rank + 1) * n]
        produced = mine if batches is None else resume_point(batches, batch_size, mine)[0]
        for worker, k in enumerate(produced):
            consumer = rank * n + worker
            for m, per_pass in enumerate(plan.read(consumer, plan.order(consumer, seed, epoch)[:k])):
                for r, taken in enumerate(per_pass):
                    out[m][r][consumer] = taken
    return out


def later_plan(previous: SegmentPlan, read: list[list[np.ndarray]], members: list[Member], index: int,
               num_consumers: int, num_workers: int) -> SegmentPlan:
    """Segment `index` > 0: what `previous` left of each pass (`read`: what its consumers read), apportioned to
    `num_consumers` consumers in proportion to what the member has left for each after its ended segments."""
    passes = []
    for member, row, read_row in zip(members, previous.passes, read, strict=True):
        new_row = []
        for p, taken in zip(row, read_row, strict=True):
            segments = p.segments
            if taken.any():  # a segment in which nothing was read of this pass leaves none behind
                segments += (Segment(consumer_shape(previous.num_consumers), tuple(int(t) for t in taken)),)
            left = p.left - int(taken.sum())
            if left:
                shares = member.loader.consumer_counts(p.epoch, num_consumers, segments)
                quotas = np.asarray(apportion(left, shares), dtype=np.int64)
            else:
                quotas = np.zeros(num_consumers, dtype=np.int64)
            new_row.append(MemberPass(p.epoch, left, segments, quotas))
        passes.append(new_row)
    return SegmentPlan(index, num_consumers, num_workers, passes)


def current_plan(members: list[Member], segments: tuple[Segment, ...], world_size: int, num_workers: int,
                 seed: int, epoch: int) -> SegmentPlan:
    """The plan of the current segment of `epoch` in the shape `world_size` x `num_workers`, after the ended
    mixture `segments` (none: segment 0)."""
    shapes = [(s.shape["world_size"], s.shape["num_workers"]) for s in segments] + [(world_size, num_workers)]
    plan = first_plan(members, shapes[0][0] * shapes[0][1], shapes[0][1], epoch)
    for index, segment in enumerate(segments, 1):
        ranks, workers = shapes[index]
        plan = later_plan(plan, emitted(plan, segment, seed, epoch), members, index, ranks * workers, workers)
    return plan
