"""The `map` loader's dataset: random access to every frame of the selected episodes."""

import logging

import numpy as np
import torch.utils.data

from dl.contracts.config import LoaderConfig
from dl.contracts.decoder import Decoder
from dl.contracts.errors import DlError
from dl.contracts.needs import DataLoaderNeeds
from dl.contracts.resume import ResumePosition
from dl.contracts.source import Prefetches
from dl.contracts.units import parse_bytes
from dl.dataloader.resume import config_hash
from dl.dataloader.world import resolve_ranks
from dl.format.kept_screens import screen_path
from dl.format.lerobot_names import LeRobotNames
from dl.format.locate import locate_all
from dl.format.metadata import DatasetMeta
from dl.format.samples import SampleBuilder
from dl.format.selection_checks import check_selection
from dl.format.tabular import tabular_keys

from .arrow_store import ArrowEpisodeStore
from .sampler import EpochSampler

log = logging.getLogger(__name__)


class MapDataset(torch.utils.data.Dataset, LeRobotNames):
    """Random access to every frame of the selected episodes, LeRobot `LeRobotDataset`-compatible.

    Position `i` (0 <= i < len) is the i-th frame of the selected episodes in ascending episode order,
    the same order `LeRobotDataset(episodes=...)` uses, so `ds[i]` equals LeRobot's `ds[i]`. Tabular rows (and
    the encoded images of image features) live in a memory-mapped Arrow file (see `ArrowEpisodeStore`), every row
    checked when the loader is built (`dl.format.selection_checks.check_selection`: the largest timestamp gap over the
    selection against `tolerance_s`, NaN/inf counted into one warning; its per-episode results kept in dl's cache
    folder for a later open of the same rows and files, `dl.format.kept_screens`); frames are decoded per sample by
    the decoder plugin, all of one camera's timestamps in one call.

    Order: `sampler` (an `EpochSampler`, given to the DataLoader by `dl.make_dataloader`) permutes every
    position per (seed, epoch) and deals rank `r` every `world_size`-th one, so ranks are disjoint and
    cover each frame once per epoch. It is `dl.contracts.loader.Resumable`: a resume continues the epoch's order
    `batches_consumed * batch_size` positions in, with any number of DataLoader workers.

    It carries LeRobot's names for what it serves (`dl.format.lerobot_names.LeRobotNames`: `fps`, `features`,
    `num_frames`, `num_episodes` of the selection, `camera_keys`, `root`, `repo_id`, `set_image_transforms`).

    Start-up does not grow with what is not read: the episodes are columns (`meta.columns`), the selection
    a sequence of views built on demand, the sources hear of the files once per group of episodes sharing
    them, and the rows stay in the mapped file until a sample slices them.

    Args:
        meta: the dataset metadata.
        decoder: a decoder plugin instance.
        config: episodes, delta_timestamps, image_dtype, tolerance_s, strict, seed, rank, world_size.
        tabular_cache_bytes: the most bytes dl's tabular cache folder keeps (an int, or a size such as "16G");
            after building a new file the least recently used others are deleted until the folder fits (the
            file in use is always kept).

    Raises:
        MissingFilesError: a selected episode's data or video file is missing.
        DatasetFormatError, TimestampToleranceError: a selected episode's rows or videos would be served wrong.
        DlError: no episodes selected, a bad delta_timestamps or tabular_cache_bytes.
    """

    def __init__(self, meta: DatasetMeta, decoder: Decoder, config: LoaderConfig,
                 tabular_cache_bytes: int | str = "16G"):
        self.meta, self.decoder, self.config = meta, decoder, config
        limit = parse_bytes(tabular_cache_bytes, "map loader: tabular_cache_bytes")
        if limit < 1:
            raise DlError(f"map loader: tabular_cache_bytes must be positive, got {tabular_cache_bytes!r}.")
        self.episodes = meta.select(config.episodes)
        if not len(self.episodes):
            raise DlError(f"no episodes selected from {meta.source.url}.")
        ranks = resolve_ranks(config.rank, config.world_size)
        self.rank, self.world_size = ranks.rank, ranks.world_size
        keys = tabular_keys(meta)
        self.builder = SampleBuilder(meta, keys, decoder, config)
        self.builder.check_streams(self.episodes)
        if isinstance(meta.source, Prefetches):  # every selected episode's byte ranges are needed from the start
            spans = announce_download(meta, self.episodes)
            for data_path, group in spans.items():  # one admission per data file: its episodes' adjacent ranges
                meta.source.admit(data_path, group)
        locate_all(meta, self.episodes)  # one warning for episodes meta/episodes places in the wrong data file
        self.store = ArrowEpisodeStore.build(meta, self.episodes, keys + meta.image_keys, limit)
        check_selection(meta, self.episodes, self.store.arrays, self.store.runs(keys), config.tolerance_s,
                        config.strict, config.frame_pairing, screen_path(meta, self.episodes, self.store.path))
        self.starts = self.store.starts
        self.sampler = EpochSampler(len(self), self.rank, self.world_size, config.seed)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def locate(self, i: int) -> tuple[int, int]:
        """(position of the episode in the selection, row within it) of position `i`."""
        if not 0 <= i < len(self):
            raise IndexError(f"position {i} out of range for {len(self)} frames")
        e = int(np.searchsorted(self.starts, i, side="right")) - 1
        return e, i - int(self.starts[e])

    def position_of(self, index: int) -> int:
        """The position of the frame whose global `index` column equals `index`.

        Raises:
            KeyError: no selected episode holds that index.
        """
        first = self.episodes.dataset_from_index
        holding = np.flatnonzero((first <= index) & (index < first + self.episodes.lengths))
        if not len(holding):
            raise KeyError(f"index {index} is not in the selected episodes")
        e = int(holding[0])
        return int(self.starts[e]) + index - int(first[e])

    def __getitem__(self, i: int) -> dict:
        e, row = self.locate(i)
        return self.builder.build(self.episodes[e], self.store.arrays(e), row)

    def dataloader_needs(self) -> DataLoaderNeeds:
        """The sampler: this loader orders and shards itself."""
        return DataLoaderNeeds(sampler=self.sampler)

    def emit_uint8_frames(self, on: bool = True) -> None:
        """Give uint8 camera frames (`on`) or `config.image_dtype` ones again, from now on, in this process
        (`dl.contracts.loader.DefersFloat`)."""
        self.builder.emit_uint8(on)

    # ---------------------------------------------------------------------------- Resumable
    @property
    def epoch(self) -> int:
        """The epoch the next `iter()` of the sampler reads."""
        return self.sampler.epoch

    def set_epoch(self, epoch: int) -> None:
        """Read `epoch` from its start next (as `DistributedSampler.set_epoch`); drops a pending resume."""
        self.sampler.epoch, self.sampler.position = epoch, None

    def resume_from(self, position: ResumePosition) -> None:
        """Continue `position.epoch` after `position.batches` batches (the DataLoader delivers a map-style
        dataset's batches in sampler order, so that is a position in the rank's share of the epoch)."""
        self.sampler.epoch, self.sampler.position = position.epoch, position

    def resume_position(self) -> ResumePosition | None:
        """The pending resume of the next iteration (None: the epoch from its start)."""
        return self.sampler.position

    def resume_invariants(self, batch_size: int, num_workers: int) -> dict:
        """The episodes and the seed (the order depends on them)."""
        return {"episodes": config_hash(self.episodes.index.tolist()), "seed": self.config.seed}

    def resume_shape(self, batch_size: int, num_workers: int) -> dict:
        """World size and batch size (the ranks' shares depend on them; DataLoader workers do not)."""
        return {"world_size": self.world_size, "batch_size": batch_size}

    # ---------------------------------------------------------------------------- ServesConsumers
    def _consumer_sampler(self, epoch: int, consumer: int, num_consumers: int, segments, skip: int) -> EpochSampler:
        """The sampler of one consumer of a flat world (`dl.contracts.loader.ServesConsumers`): a rank of its own."""
        sampler = EpochSampler(len(self), consumer, num_consumers, self.config.seed)
        sampler.epoch, sampler.position = epoch, ResumePosition(epoch, skip, 1, tuple(segments))
        return sampler

    def consumer_counts(self, epoch: int, num_consumers: int, segments=()) -> list[int]:
        """Positions each consumer of a flat world reads of `epoch` after `segments` (its share of the epoch's
        permutation, less what those segments consumed)."""
        return [len(self._consumer_sampler(epoch, c, num_consumers, segments, 0)) for c in range(num_consumers)]

    def consumer_stream(self, epoch: int, consumer: int, num_consumers: int, segments=(), skip: int = 0):
        """The samples of one consumer's share of `epoch`, in the sampler's order, its first `skip` left out."""
        for i in self._consumer_sampler(epoch, consumer, num_consumers, segments, skip):
            yield self[i]


def announce_download(meta: DatasetMeta, episodes) -> dict[str, list]:
    """Have a remote source plan the selection's byte ranges (`Source.prepare`: it indexes the files) and say
    (logger `dl.plugins.map`, INFO) how many bytes it will fetch before it does. Returns the episodes' spans
    (`DatasetMeta.file_spans`) grouped by data file, in selection order."""
    grouped: dict[str, list] = {}
    for ep in episodes:
        grouped.setdefault(ep.data_path, []).extend(meta.file_spans(ep))
    total = meta.source.prepare([span for spans in grouped.values() for span in spans])
    if total is not None:
        files = sorted({span.path for spans in grouped.values() for span in spans})
        whole = sum(meta.files.get(f, 0) for f in files)
        log.info("map loader: %d episode(s) need %.1f MB of %d file(s) (%.1f MB whole), from %s; fetching them now",
                 len(episodes), total / 1e6, len(files), whole / 1e6, meta.source.url)
    return grouped
