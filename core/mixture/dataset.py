"""The mixture's dataset: several loaders read as one stream (an IterableDataset), each sample drawn from a member by
weight, each member read in its own order, exactly once per member epoch, with exact and elastic resume."""

import dataclasses
import time
import warnings

import torch.utils.data

from ..contracts.config import LoaderConfig
from ..contracts.errors import DlError
from ..contracts.loader import DefersFloat, Loader, Resumable, ServesConsumers
from ..contracts.needs import DataLoaderNeeds, merge_needs
from ..contracts.resume import ResumePosition
from ..dataloader.build import loader_needs
from ..dataloader.resume import config_hash, resumed_worker
from ..dataloader.shared_counters import SharedCounters
from ..dataloader.world import World, current_world, resolve_ranks
from .plan import Member, MemberPass, SegmentPlan, current_plan
from .quotas import epoch_quotas, member_weights
from .schema import SampleSchema, member_features, served_features
from .stats import MixtureStats, renamed_stats


class MixtureDataset(torch.utils.data.IterableDataset):
    """Several datasets' loaders read as one stream of LeRobot samples, each carrying `dataset_index` (its member's
    position in `names`). Build it with `dl.make_mixture`; read it with `dl.make_dataloader`.

    What to read: `members` (loaders that are `dl.contracts.loader.ServesConsumers` and `Resumable`: `map`, `pool`,
    or a third party's), their keys renamed (`renames`) to the `features` served (`dl.mixture.schema`), and how much
    of each: `weights` and `samples_per_epoch` give each member its quota of every mixture epoch
    (`dl.mixture.quotas`).
    How to read: `seed`, `rank` / `world_size` (default: `dl.dataloader.world.resolve_ranks`). Every rank x
    DataLoader worker is a consumer of its own of every member; its samples come from its members in a uniformly
    random interleave of its quotas, each member in its own order (the `map` loader's permutation, the `pool`
    loader's episode pool), a member's epoch restarting, reshuffled, when the quota needs more than one
    (`dl.mixture.plan`). Which member each upcoming sample comes from is a pure function of (seed, epoch, counters),
    so a run resumes exactly, and elastically in another shape (`dl.dataloader.elastic`), like the `pool` loader.

    The epoch: by default, every member read whole at least once: the member with the most frames per unit of weight
    exactly once, the others in proportion to their weights (with weights by frames, the default, every frame of
    every member exactly once, in a random interleave); or `samples_per_epoch` samples, member `m` giving
    `weight_m x samples_per_epoch` of them (`dl.mixture.quotas.epoch_quotas`). A member is read whole as often as
    its quota holds its epoch (each of its epochs exactly once) and the rest from one more of its epochs, which
    that mixture epoch reads in part (no frame twice); the next mixture epoch starts the member's next epoch.

    Attributes:
        members, names: the loaders and their names; `weights`: each member's share of samples (summing to 1);
            `quotas`: samples per mixture epoch of each; `frames`: samples in one epoch of each.
        video_keys: the camera keys of the samples; `episodes`: every member's episodes, member by member (episode
            indices repeat across datasets: `dataset_index` tells them apart).
        stats: each member's normalization stats by name and their aggregate (`dl.mixture.stats.MixtureStats`).

    Raises:
        DlError: a member that cannot be one (not `ServesConsumers` and `Resumable`), members with different image
            dtypes, bad weights or renames, or features that differ between members (`dl.mixture.schema`).
    """

    def __init__(self, members: list, names: list[str], renames: list[dict[str, str]],
                 weights: str | list[float] = "frames", features: list[str] | None = None,
                 samples_per_epoch: int | None = None, seed: int = 0, rank: int | None = None,
                 world_size: int | None = None):
        if not members:
            raise DlError("a mixture needs at least one member.")
        for name, member in zip(names, members, strict=True):
            lacking = [p.__name__ for p in (Loader, Resumable, ServesConsumers) if not isinstance(member, p)]
            if lacking:
                raise DlError(f"mixture member {name} ({type(member).__name__}) is not {' and '.join(lacking)} "
                              "(dl.contracts.loader): a mixture reads its members one consumer at a time and resumes "
                              "them from counters. Build it with loader 'map' or 'pool'.")
        dtypes = {m.config.image_dtype for m in members}
        if len(dtypes) > 1:
            raise DlError(f"mixture members give camera frames as {' and '.join(sorted(dtypes))}: build every member "
                          "with the same image_dtype.")
        self.members, self.names = list(members), list(names)
        self.frames = [sum(ep.length for ep in m.episodes) for m in members]
        self.weights = member_weights(weights, self.frames, [len(m.episodes) for m in members], names)
        if samples_per_epoch is not None and int(samples_per_epoch) < 1:
            raise DlError(f"mixture samples_per_epoch must be >= 1, got {samples_per_epoch}.")
        self.quotas = epoch_quotas(self.weights, None if samples_per_epoch is None else int(samples_per_epoch),
                                   self.frames, weights == "frames")
        self.samples_per_epoch = sum(self.quotas)
        self._plan_members = [Member(n, m, f, q) for n, m, f, q in zip(names, members, self.frames, self.quotas,
                                                                        strict=True)]
        per_member = [member_features(m.meta, m.config.delta_timestamps, getattr(m.decoder, "resize", None), r,
                                       getattr(m.decoder, "resize_depth", False))
                      for m, r in zip(members, renames, strict=True)]
        self.schema = SampleSchema(per_member, served_features(per_member, self.names, features))
        self.video_keys = self.schema.cameras
        self.episodes = [ep for m in members for ep in m.episodes]
        ranks = resolve_ranks(rank, world_size)
        self.rank, self.world_size = ranks.rank, ranks.world_size
        self.config = LoaderConfig(image_dtype=dtypes.pop(), seed=seed, rank=rank, world_size=world_size)
        self.seed = seed
        count = range(len(members))
        self.counters = SharedCounters((*(f"samples_{m}" for m in count), *(f"epochs_{m}" for m in count),
                                        "fast_forward_us"))
        self.stats_merge = {"members": "same", "weights": "same", "samples_per_epoch": "same",
                            "resume_fast_forward_s": "max",
                            **{f"member{m}_{k}": rule for m in count
                               for k, rule in (("samples", "sum"), ("epochs_started", "max"), ("quota", "same"),
                                               ("passes_per_epoch", "same"))}}
        self.stats = MixtureStats({n: renamed_stats(m.meta.stats_document, r)
                                   for n, m, r in zip(names, members, renames, strict=True)},
                                  self.frames, self.weights)
        self.epoch = 0
        self._resume: ResumePosition | None = None

    # ----------------------------------------------------------------------------------------- the DataLoader
    def dataloader_needs(self) -> DataLoaderNeeds:
        """What every member's loader, decoder and source need of the DataLoader, merged (`dl.contracts.loader.
        Composite`), less a member's sampler: the mixture orders its members itself."""
        return merge_needs({f"mixture member {n}": dataclasses.replace(loader_needs(m), sampler=None)
                            for n, m in zip(self.names, self.members, strict=True)})

    def emit_uint8_frames(self, on: bool = True) -> None:
        """Give uint8 camera frames from now on, in this process (`on`), when every member can
        (`dl.contracts.loader.DefersFloat`; otherwise they stay float32 and the collate only stacks them), or
        `config.image_dtype` again (not `on`)."""
        if all(isinstance(m, DefersFloat) for m in self.members):
            for member in self.members:
                member.emit_uint8_frames(on)

    def set_image_transforms(self, transforms) -> None:
        """Apply `transforms` to every member's camera frames (`dl.format.lerobot_names.LeRobotNames.
        set_image_transforms`)."""
        for member in self.members:
            member.set_image_transforms(transforms)

    # ----------------------------------------------------------------------------------------- epochs
    def set_epoch(self, epoch: int) -> None:
        """Read `epoch` from its start on the next `iter()`; a pending resume is dropped."""
        self.epoch, self._resume = epoch, None

    def resume_from(self, position: ResumePosition) -> None:
        """Make the next `iter()` continue epoch `position.epoch` from `position`."""
        self.epoch, self._resume = position.epoch, position

    def resume_position(self) -> ResumePosition | None:
        """The pending resume of the next `iter()` (None: from the epoch's start)."""
        return self._resume

    def resume_invariants(self, batch_size: int, num_workers: int) -> dict:
        """What a resume must not change: the members (their names, frames and own invariants), their quotas and
        the seed."""
        return {"members": self.names, "frames": self.frames, "quotas": self.quotas, "seed": self.seed,
                "member_invariants": [config_hash(m.resume_invariants(1, 0)) for m in self.members]}

    def resume_shape(self, batch_size: int, num_workers: int) -> dict:
        """What a resume may change: world size, DataLoader workers (0 and 1 are one consumer per rank) and batch
        size; another shape replays what was emitted and deals the rest anew (`dl.mixture.plan`)."""
        return {"world_size": self.world_size, "num_workers": max(num_workers, 1), "batch_size": batch_size}

    # ----------------------------------------------------------------------------------------- iteration
    def __iter__(self):
        world = current_world(self.rank, self.world_size)
        epoch, position = self.epoch, self._resume
        self.epoch, self._resume = epoch + 1, None  # iter() advances the epoch in the iterating process
        t0 = time.perf_counter()
        plan = current_plan(self._plan_members, position.segments if position else (), world.world_size,
                            world.num_workers, self.seed, epoch)
        counts = plan.counts()
        world, skip = resumed_worker(world, position, counts)
        self._warn_uneven(world, counts)
        return self._stream(plan, world.consumer, epoch, skip, time.perf_counter() - t0)

    def _stream(self, plan: SegmentPlan, consumer: int, epoch: int, skip: int, replay_s: float):
        t0 = time.perf_counter()
        order = plan.order(consumer, self.seed, epoch)
        done = plan.read(consumer, order[:skip])
        cursors = [_Cursor(passes, consumer, read) for passes, read in zip(plan.passes, done, strict=True)]
        if skip or plan.index:
            self.counters.set_max("fast_forward_us", int((time.perf_counter() - t0 + replay_s) * 1e6))
        try:
            for m in _blocks(order, skip):
                cursor, member = cursors[m], self._plan_members[m]
                if cursor.stream is None:
                    p = cursor.current
                    cursor.stream = member.loader.consumer_stream(p.epoch, consumer, plan.num_consumers, p.segments,
                                                                  cursor.taken)
                    self.counters.set_max(f"epochs_{m}", p.epoch + 1)
                sample = next(cursor.stream, None)
                if sample is None:
                    raise DlError(f"mixture member {member.name} ended its epoch {cursor.current.epoch} after "
                                  f"{cursor.taken} samples for consumer {consumer} of {plan.num_consumers}, short of "
                                  f"the {int(cursor.current.quotas[consumer])} its consumer_counts promised.")
                cursor.advance()
                self.counters.add(f"samples_{m}")
                yield self.schema.convert(sample, m)
        finally:
            for cursor in cursors:
                cursor.close()

    def _warn_uneven(self, world: World, counts: list[int]) -> None:
        if counts[world.consumer] == 0:
            warnings.warn(f"mixture: rank {world.rank} worker {world.worker} has no samples this epoch (world_size "
                          f"{world.world_size} x {world.num_workers} workers); use fewer workers.", stacklevel=3)
        per_rank = [sum(counts[r * world.num_workers:(r + 1) * world.num_workers]) for r in range(world.world_size)]
        if world.consumer == 0 and len(set(per_rank)) > 1:
            warnings.warn(f"mixture: ranks get {min(per_rank)} to {max(per_rank)} samples this epoch; ranks that "
                          "finish early stop first (DDP may then wait on them).", stacklevel=3)

    # ----------------------------------------------------------------------------------------- benchmark
    def reset_stats(self) -> None:
        """Zero the counters (the benchmark does so after its single-process pass)."""
        self.counters.reset()

    def figures(self, num_workers: int, batch_size: int) -> dict:
        """The mixture's figures for `dl run` (`dl.contracts.loader.ReportsStats`): per member, its weight, the
        samples drawn from it, its quota of an epoch and its passes per epoch (over 1: its epoch restarts within
        each mixture epoch, oversampled; under 1: read in part), and the most member epochs any consumer started;
        and, once a resume happened, the longest replay (s)."""
        totals = self.counters.total()
        values = self.counters.values
        figures = {"members": self.names, "weights": [round(w, 6) for w in self.weights],
                   "samples_per_epoch": self.samples_per_epoch}
        for m, member in enumerate(self._plan_members):
            figures.update({f"member{m}_samples": totals[f"samples_{m}"],
                            f"member{m}_epochs_started": int(values[:, self.counters.names.index(f"epochs_{m}")].max()),
                            f"member{m}_quota": member.quota,
                            f"member{m}_passes_per_epoch": round(member.quota / member.frames, 4)})
        replay_us = int(values[:, self.counters.names.index("fast_forward_us")].max())
        return {**figures, "resume_fast_forward_s": replay_us / 1e6} if replay_us else figures


def _blocks(order, start: int, size: int = 4096):
    """The entries of `order` from `start` on, as Python ints, converted a block at a time (an epoch's order may hold
    millions)."""
    for begin in range(start, len(order), size):
        yield from order[begin:begin + size].tolist()


class _Cursor:
    """Where one consumer stands in one member: the pass it reads, how much of it it has read, and its open
    stream (None until the consumer next draws this member)."""

    def __init__(self, passes: list[MemberPass], consumer: int, read: list[int]):
        self.passes, self.consumer, self.stream = passes, consumer, None
        self.index = next((r for r, p in enumerate(passes) if read[r] < p.quotas[consumer]), len(passes))
        self.taken = read[self.index] if self.index < len(passes) else 0

    @property
    def current(self) -> MemberPass:
        return self.passes[self.index]

    def advance(self) -> None:
        """One more sample read; past the pass's quota, close its stream (a partial pass stops there) and move on
        to the next pass this consumer reads."""
        self.taken += 1
        if self.taken == self.current.quotas[self.consumer]:
            self.close()
            self.index, self.taken = self.index + 1, 0
            while self.index < len(self.passes) and self.current.quotas[self.consumer] == 0:
                self.index += 1

    def close(self) -> None:
        """Close the open stream, if any (a generator's `close()` releases what the member holds for it)."""
        if self.stream is not None:
            getattr(self.stream, "close", lambda: None)()
            self.stream = None
