"""Loader `map`: a map-style dataset over the selected episodes; the DataLoader does the shuffling."""

import numpy as np
import torch.utils.data

from dl.config import LoaderConfig
from dl.decoder import Decoder
from dl.errors import DlError
from dl.hookspecs import hookimpl
from dl.metadata import DatasetMeta
from dl.samples import SampleBuilder
from dl.tabular import tabular_keys

from .arrow_store import ArrowEpisodeStore


class MapDataset(torch.utils.data.Dataset):
    """Random access to every frame of the selected episodes, LeRobot `LeRobotDataset`-compatible.

    Position `i` (0 <= i < len) is the i-th frame of the selected episodes in ascending episode order,
    the same order `LeRobotDataset(episodes=...)` uses, so `ds[i]` equals LeRobot's `ds[i]`. Tabular rows
    live in a memory-mapped Arrow file (see `ArrowEpisodeStore`); frames are decoded per sample by the
    decoder plugin, all of one camera's timestamps in one call.

    Args:
        meta: the dataset metadata.
        decoder: a decoder plugin instance.
        config: episodes, delta_timestamps, image_dtype, tolerance_s.

    Raises:
        MissingFilesError: a selected episode's data or video file is missing.
        DlError: no episodes selected, or a bad delta_timestamps.
    """

    def __init__(self, meta: DatasetMeta, decoder: Decoder, config: LoaderConfig):
        self.meta, self.decoder, self.config = meta, decoder, config
        self.episodes = meta.select(config.episodes)
        if not self.episodes:
            raise DlError(f"no episodes selected from {meta.source.url}.")
        keys = tabular_keys(meta)
        self.builder = SampleBuilder(meta, keys, decoder, config)
        self.builder.check_codecs(self.episodes[0])
        self.store = ArrowEpisodeStore.build(meta, self.episodes, keys)
        self.starts = np.cumsum([0] + [ep.length for ep in self.episodes])

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
        for e, ep in enumerate(self.episodes):
            if ep.dataset_from_index <= index < ep.dataset_to_index:
                return int(self.starts[e]) + index - ep.dataset_from_index
        raise KeyError(f"index {index} is not in the selected episodes")

    def __getitem__(self, i: int) -> dict:
        e, row = self.locate(i)
        return self.builder.build(self.episodes[e], self.store.arrays(e), row)


@hookimpl
def register_loaders(register):
    register("map", MapDataset, "map-style Dataset, memory-mapped Arrow rows; DataLoader shuffles")
