"""The loader contract: what every loader gives, and the optional capabilities the benchmark, the CLI and
`dl.ResumableDataLoader` use, each a small Protocol checked with `isinstance`.

A loader is a `torch.utils.data.Dataset` (map-style) or `IterableDataset` (streaming) of LeRobot sample
dicts (see `dl.format.samples`) that also satisfies `Loader`. Its factory is
`factory(meta, decoder, config, **options)`: the loaded `dl.DatasetMeta`, the decoder plugin instance,
the `dl.LoaderConfig` every loader honours, and its own options as keyword arguments with defaults.
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .config import LoaderConfig
    from .dataloader import DataLoaderNeeds
    from .decoder import Decoder
    from .format.metadata import DatasetMeta, EpisodeMeta


@runtime_checkable
class Loader(Protocol):
    """What every loader gives.

    Attributes:
        meta: the dataset's metadata (its `source` reads every file).
        decoder: the decoder plugin instance that decodes camera frames.
        config: what it was asked to produce (episodes, windows, dtype, tolerance, seed, rank/world size).
        episodes: the `EpisodeMeta`s it serves, in ascending episode order (all ranks together).
    """

    meta: "DatasetMeta"
    decoder: "Decoder"
    config: "LoaderConfig"
    episodes: "list[EpisodeMeta]"

    def dataloader_needs(self) -> "DataLoaderNeeds":
        """What this loader needs of the DataLoader (a sampler for a map-style loader that orders itself,
        a collate function...); `dl.dataloader.build_dataloader` merges it with its decoder's and
        source's."""


@runtime_checkable
class Resumable(Protocol):
    """A loader whose position in an epoch is a few counters, so a run can stop and continue exactly.

    `dl.ResumableDataLoader` drives it: it counts the batches it delivers, saves
    `{"epoch", "batches_consumed", "batch_size", "invariants"}` (state out) and hands them back through
    `resume_from` (state in) after checking `resume_invariants` (what a resume must not change).
    `iter()` reads `epoch` and then moves it on, so each `iter()` is the next epoch, reshuffled.
    """

    epoch: int

    def set_epoch(self, epoch: int) -> None:
        """Read `epoch` from its start on the next `iter()` (drops a pending resume)."""

    def resume_from(self, epoch: int, batches_consumed: int, batch_size: int) -> None:
        """Make the next `iter()` continue `epoch` after `batches_consumed` batches of `batch_size`."""

    def resume_batches(self) -> int:
        """Batches the next `iter()` skips: the pending resume's `batches_consumed`, else 0."""

    def resume_invariants(self, batch_size: int, num_workers: int) -> dict:
        """What a resume must not change, JSON-able (e.g. the episodes, the seed, the world size); a state
        saved under other invariants is refused with `ResumeError` naming the ones that differ."""


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
        steady window. Count inside DataLoader workers with `dl.shared_counters.SharedCounters`."""

    def stats(self, num_workers: int, batch_size: int) -> dict:
        """The figures counted since the last `reset_stats()`, JSON-able, keyed as in `stats_merge`."""
