"""The loader contract: what every loader gives, and the optional capabilities the benchmark, the CLI and
`dl.ResumableDataLoader` use, each a small Protocol checked with `isinstance`.

A loader is a `torch.utils.data.Dataset` (map-style) or `IterableDataset` (streaming) of LeRobot sample
dicts (see `dl.format.samples`) that also satisfies `Loader`. Its factory is
`factory(meta, decoder, config, **options)`: the loaded `dl.DatasetMeta`, the decoder plugin instance,
the `dl.LoaderConfig` every loader honours, and its own options as keyword arguments with defaults.
"""

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..format.metadata import DatasetMeta, EpisodeMeta
    from .config import LoaderConfig
    from .decoder import Decoder
    from .needs import DataLoaderNeeds
    from .resume import ResumePosition, Segment


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

    def figures(self, num_workers: int, batch_size: int) -> dict:
        """The figures counted since the last `reset_stats()`, JSON-able, keyed as in `stats_merge`."""


@runtime_checkable
class OpensFiles(Protocol):
    """A loader whose consumers read several video files in turn (the `pool` loader's open episodes x cameras)
    and says how many, so the host keeps that many decoders open (`dl.host.reconcile`): a plugin never resizes
    another plugin's cache."""

    def open_files_wanted(self) -> tuple[int, str]:
        """(video files one consumer reads in turn, why in words, e.g. "episode_pool_size 16 x 2 cameras")."""


@runtime_checkable
class FitsWorkers(Protocol):
    """A loader that sizes part of its order for the consumers that read it (the `pool` loader's "auto" chunk
    length: a chunk open for every episode one consumer opens, and a consumer is a rank's DataLoader worker).
    `dl.dataloader.build.build_dataloader` calls `fit_workers` before it makes the DataLoader, so the workers
    start with the fitted order; a DataLoader built elsewhere leaves the loader sized for one worker per rank.
    What the fit chose is part of the loader's resume invariants, so `dl.ResumableDataLoader.load_state_dict`
    hands the saved invariants to `keep_invariants` first: a resume in another number of workers keeps the
    order the state was saved in (its replay of earlier shapes needs it)."""

    def fit_workers(self, num_workers: int) -> None:
        """Size the order for `num_workers` DataLoader workers per rank (0: the rank's own process)."""

    def keep_invariants(self, saved: dict) -> None:
        """Take back what a fit chose from `saved` (`Resumable.resume_invariants` of a saved state), when it is
        compatible with this loader's options; anything else is left for the invariant check to refuse."""


@runtime_checkable
class DefersFloat(Protocol):
    """A loader that can give uint8 camera frames although it was asked for float32, so that the DataLoader's
    collate (`dl.dataloader.build.build_dataloader`, `dl.dataloader.frames.stack_frames`) converts them while it
    stacks the batch: the same values, one pass over the pixels instead of two. In a DataLoader worker the worker's
    copy gives uint8 for good; without workers the DataLoader switches it on only while it fetches a batch."""

    def emit_uint8_frames(self, on: bool = True) -> None:
        """From now on, in this process, give camera frames as uint8 [0, 255] (`on`), or as
        `config.image_dtype` again (not `on`)."""


@runtime_checkable
class ServesConsumers(Protocol):
    """A loader that reads one consumer's share of any of its epochs on request, in any process, from any point: what
    a mixture (`dl.mixture`) asks of each member, so that any loader implementing it can be one.

    The consumers are those of a *flat world* of `num_consumers` readers, each reading as a rank of its own with one
    worker and batches of one sample (a mixture's ranks x DataLoader workers, flattened); the process that iterates a
    consumer's stream reads all of it, whatever DataLoader worker it is. An epoch read in several flat worlds (after an
    elastic resume) lists the ended ones as `dl.contracts.resume.Segment`s of shape
    `dl.contracts.resume.consumer_shape(n)`, whose `batches_consumed` are the samples each consumer of that world had
    read, from the start of its stream. Exactly once: for an epoch and its ended segments, the streams of
    `num_consumers` consumers together hold every sample of the epoch that those segments did not emit, once each,
    the same ones for the same seed.
    """

    def consumer_counts(self, epoch: int, num_consumers: int, segments: "Sequence[Segment]" = ()) -> list[int]:
        """How many samples each consumer `0..num_consumers-1` reads of `epoch` after the ended `segments` (what those
        flat worlds emitted is left out), without reading anything."""

    def consumer_stream(self, epoch: int, consumer: int, num_consumers: int, segments: "Sequence[Segment]" = (),
                        skip: int = 0) -> Iterator[dict]:
        """Consumer `consumer`'s samples of `epoch` after the ended `segments`, in the loader's own order, its first
        `skip` passed over from counters (no reads, no decode). Closing the iterator early releases what it holds."""


@runtime_checkable
class Composite(Protocol):
    """A loader made of other loaders (a mixture, `dl.mixture`): it has no `meta` or `decoder` of its own, and
    `dl.dataloader.build.build_dataloader` asks it, not its members, what the DataLoader needs.

    Attributes:
        members: the loaders it reads.
        video_keys: the camera keys of its samples (for a single dataset's loader, `meta.video_keys`).
        config: what it produces (`image_dtype` above all; its `seed`, `rank` and `world_size`).
    """

    members: "Sequence[Loader]"
    video_keys: list[str]
    config: "LoaderConfig"

    def dataloader_needs(self) -> "DataLoaderNeeds":
        """What the DataLoader needs for every member's decoder and source, and for the composite itself, merged
        (a member's own sampler is not among them: the composite orders its members)."""


@runtime_checkable
class Peer(Protocol):
    """A loader that drives another project's reader (LeRobot's `LeRobotDataset`, Lance, Ray Data, Daft) under dl's
    benchmark, so that `dl run --loader map,lerobot` compares them in one table (`dl.plugins.peers`).

    Attributes:
        library: the project it drives and its version, e.g. "lerobot 0.6.1".
        order: how it orders samples, as its own docs drive it, in words (e.g. "torch RandomSampler (global
            shuffle)", "sequential pass, no shuffle").
        shuffled: whether that order is a shuffle (an unshuffled peer is compared with dl's sequential figures).
    """

    library: str
    order: str
    shuffled: bool


@runtime_checkable
class BatchesItself(Protocol):
    """A loader that makes its own batches instead of being read by a torch DataLoader (Ray Data's
    `iter_torch_batches`, Daft's row iterator): the benchmark iterates `batches(...)` where it would iterate a
    DataLoader. Each batch is a dict of tensors with at least `index` and `episode_index` ([B] int64)."""

    def batches(self, batch_size: int, num_workers: int, seed: int) -> "Iterator[dict]":
        """An iterator over one epoch's batches of `batch_size` samples, read with `num_workers` parallel readers
        of the library's own kind, shuffled by `seed` where the library shuffles."""

    def facts(self) -> dict:
        """JSON-able facts for a result file (as `dl.DlDataLoader.facts`): how the library reads and batches."""


@runtime_checkable
class RunsInOwnEnvironment(Protocol):
    """A loader *factory* whose library lives in another Python environment (a peer's venv): the host starts this
    loader's benchmark runs with that environment's interpreter, which must have dl installed too."""

    def interpreter(self, **options) -> "str | None":
        """The Python interpreter the runs need, given the loader's options (None: the host's own).

        Raises:
            PluginError: the library is neither importable here nor in an environment dl knows, in one line
                naming what to install.
        """
