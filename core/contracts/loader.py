"""The loader contract: what every loader gives, and the optional capabilities the benchmark, the CLI and
`dl.ResumableDataLoader` use, each a small Protocol checked with `isinstance`.

A loader is a `torch.utils.data.Dataset` (map-style) or `IterableDataset` (streaming) of LeRobot sample
dicts (see `dl.format.samples`) that also satisfies `Loader`. Its factory is
`factory(meta, decoder, config, **options)`: the loaded `dl.DatasetMeta`, the decoder plugin instance,
the `dl.LoaderConfig` every loader honours, and its own options as keyword arguments with defaults.
"""

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..format.metadata import DatasetMeta, EpisodeMeta
    from .config import LoaderConfig
    from .decoder import Decoder
    from .needs import DataLoaderNeeds
    from .resume import ResumePosition


@runtime_checkable
class Loader(Protocol):
    """What every loader gives.

    Attributes:
        meta: the dataset's metadata (its `source` reads every file).
        decoder: the decoder plugin instance that decodes camera frames.
        config: what it was asked to produce (episodes, windows, dtype, tolerance, seed, rank/world size).
        episodes: the `EpisodeMeta`s it serves, in ascending episode order (all ranks together): a sequence
            (dl's loaders give `DatasetMeta.select`'s `EpisodeSelection`: views built on demand, with `.index`
            and `.lengths` arrays).
    """

    meta: "DatasetMeta"
    decoder: "Decoder"
    config: "LoaderConfig"
    episodes: "Sequence[EpisodeMeta]"

    def dataloader_needs(self) -> "DataLoaderNeeds":
        """What this loader needs of the DataLoader (a sampler for a map-style loader that orders itself,
        a collate function...); `dl.dataloader.build.build_dataloader` merges it with its decoder's and
        source's."""


@runtime_checkable
class Resumable(Protocol):
    """A loader whose position in an epoch is a few counters, so a run can stop and continue exactly, in
    the same shape or in another one (world size, workers, batch size: elastic resume, `dl.dataloader.elastic`).

    `dl.ResumableDataLoader` drives it: it counts the batches it delivers, saves them with the loader's
    shape and the epoch's earlier segments (state out), and after checking `resume_invariants` (what a
    resume must not change) hands a `dl.dataloader.elastic.ResumePosition` to `resume_from` (state in). With the
    same shape the loader continues sample for sample; with another it replays what each consumer of
    each earlier shape emitted (from counters, without reading) and serves every frame not yet emitted
    exactly once, deterministically per seed. `iter()` reads `epoch` and then moves it on, so each
    `iter()` is the next epoch, reshuffled.

    Attributes:
        epoch: the epoch the next `iter()` reads.
        rank, world_size: this process's place (`dl.dataloader.world.resolve_ranks`).
    """

    epoch: int
    rank: int
    world_size: int

    def set_epoch(self, epoch: int) -> None:
        """Read `epoch` from its start on the next `iter()` (drops a pending resume)."""

    def resume_from(self, position: "ResumePosition") -> None:
        """Make the next `iter()` continue `position.epoch` from `position`."""

    def resume_position(self) -> "ResumePosition | None":
        """The pending resume the next `iter()` starts from (None: the epoch from its start)."""

    def resume_invariants(self, batch_size: int, num_workers: int) -> dict:
        """What a resume must not change, JSON-able (e.g. the episodes, the seed); a state saved under
        other invariants is refused with `ResumeError` naming the ones that differ."""

    def resume_shape(self, batch_size: int, num_workers: int) -> dict:
        """What a resume may change, JSON-able, with `world_size` and `batch_size` at least (and
        `num_workers` for a loader whose order depends on them): the same shape continues the epoch
        exactly, another one serves its remaining frames exactly once."""


@runtime_checkable
class ReportsStats(Protocol):
    """A loader that reports its own figures for `dl run` (the result's `loader_stats`).

    Attributes:
        stats_merge: how each stat combines over ranks: "sum", "max", "min", "mean", or "same" (kept when
            every rank reports the same value).
    """

    stats_merge: Mapping[str, str]

    def reset_stats(self) -> None:
        """Zero the counters; the benchmark calls it after its single-process pass, so the stats cover the
        steady window. Count inside DataLoader workers with `dl.dataloader.shared_counters.SharedCounters`."""

    def stats(self, num_workers: int, batch_size: int) -> dict:
        """The figures counted since the last `reset_stats()`, JSON-able, keyed as in `stats_merge`."""


@runtime_checkable
class OpensFiles(Protocol):
    """A loader whose consumers read several video files in turn (the `pool` loader's open episodes x cameras)
    and says how many, so the host keeps that many decoders open (`dl.host.reconcile`): a plugin never resizes
    another plugin's cache."""

    def open_files_wanted(self) -> tuple[int, str]:
        """(video files one consumer reads in turn, why in words, e.g. "episode_pool_size 16 x 2 cameras")."""


@runtime_checkable
class DefersFloat(Protocol):
    """A loader that can give uint8 camera frames in a DataLoader worker although it was asked for float32, so
    that the worker's collate (`dl.dataloader.build.build_dataloader`, `dl.dataloader.frames.stack_frames`)
    converts them while it stacks the batch: the same values, one pass over the pixels instead of two."""

    def emit_uint8_frames(self) -> None:
        """From now on, in this process (a DataLoader worker's copy), give camera frames as uint8 [0, 255]."""
