"""Loader `daft`: Daft's LeRobot reader (`daft.datasets.lerobot.read`), a sequential pass with frames decoded."""

from collections.abc import Iterator

import numpy as np
import torch

from dl.contracts.config import LoaderConfig
from dl.contracts.decoder import Decoder
from dl.contracts.errors import PluginError
from dl.format.metadata import DatasetMeta

from .common import PeerBase
from .environments import import_peer, interpreter_for


class DaftPeer(PeerBase):
    """Daft's lazy DataFrame over the same folder (`read(root, load_video_frames=True)`, one row per frame), the
    run's episodes kept with a filter, its rows batched here in its own order: a sequential pass, no shuffle and no
    delta_timestamps (Daft's reader has neither). Frames as Daft gives them (uint8, channels last).

    Args:
        python: the interpreter of an environment with Daft and dl (default: this one if it imports daft, else the
            peers' `daft` venv).

    Raises:
        PluginError: Daft is not installed (one line naming the extra), the run asks for delta_timestamps, or as
            `PeerBase`.
    """

    name, distribution = "daft", "daft"
    order = "sequential pass (Daft's reader does not shuffle)"
    shuffled = False

    def __init__(self, meta: DatasetMeta, decoder: Decoder, config: LoaderConfig, python: str | None = None):
        super().__init__(meta, decoder, config)
        if config.delta_timestamps:
            raise PluginError("loader daft reads single frames: Daft's LeRobot reader has no delta_timestamps "
                              "(run it with --mode single).")
        self.daft = import_peer(self.name, "daft", "daft")
        self.lerobot = import_peer(self.name, "daft.datasets.lerobot", "daft")

    @classmethod
    def interpreter(cls, python: str | None = None) -> str | None:
        return interpreter_for(cls.name, "daft", "daft", "daft", python)

    def batches(self, batch_size: int, num_workers: int, seed: int) -> Iterator[dict]:
        frame = self.lerobot.read(self.root, load_video_frames=True)
        if self.config.episodes is not None:
            frame = frame.where(self.daft.col("episode_index").is_in(list(self.config.episodes)))
        rows: list[dict] = []
        for row in frame.iter_rows():
            rows.append(row)
            if len(rows) == batch_size:
                yield _collate(rows)
                rows = []
        if rows:
            yield _collate(rows)

    def facts(self) -> dict:
        return {"reader": "daft.datasets.lerobot.read(load_video_frames=True)", "batches": "its rows, in order"}


def _collate(rows: list[dict]) -> dict:
    """Daft's rows (numbers, lists, numpy frames) as a batch of tensors; text and other columns are left out."""
    batch = {}
    for key, value in rows[0].items():
        if isinstance(value, int | float | np.ndarray | list) and not isinstance(value, bool):
            try:
                batch[key] = torch.as_tensor(np.stack([np.asarray(r[key]) for r in rows]))
            except (TypeError, ValueError):
                continue
    return batch
