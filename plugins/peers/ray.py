"""Loader `ray`: Ray Data's `read_lerobot`, batched by its `iter_torch_batches` with its windowed shuffle."""

import logging
from collections.abc import Iterator

from dl.contracts.config import LoaderConfig
from dl.contracts.decoder import Decoder
from dl.format.metadata import DatasetMeta

from .common import PeerBase
from .environments import import_peer, interpreter_for

TEXT_COLUMNS = ("task", "stats")
"""read_lerobot's string columns, left out of the torch batches (`iter_torch_batches` makes tensors only)."""


class RayPeer(PeerBase):
    """Ray Data's `read_lerobot` over the same folder, episodes and delta_timestamps; batches from
    `iter_torch_batches(local_shuffle_buffer_size=shuffle_buffer)` (its windowed shuffle: read_lerobot has no global
    shuffle short of holding the decoded dataset), on a local Ray with one CPU per DataLoader worker of the run.
    Frames are Ray's: uint8, channels last.

    Args:
        shuffle_buffer: samples in its local shuffle buffer.
        python: the interpreter of an environment with Ray Data and dl (default: this one if it imports ray, else
            the peers' `ray` venv).

    Raises:
        PluginError: Ray is not installed (one line naming the extra), or as `PeerBase`.
    """

    name, distribution = "ray", "ray"
    shuffled = True

    def __init__(self, meta: DatasetMeta, decoder: Decoder, config: LoaderConfig, shuffle_buffer: int = 1000,
                 python: str | None = None):
        super().__init__(meta, decoder, config)
        self.ray = import_peer(self.name, "ray", "ray")
        import_peer(self.name, "ray.data", "ray")
        self.shuffle_buffer = shuffle_buffer
        self.order = f"iter_torch_batches' local shuffle buffer ({shuffle_buffer} samples)"
        self._facts: dict = {}

    @classmethod
    def interpreter(cls, shuffle_buffer: int = 1000, python: str | None = None) -> str | None:
        return interpreter_for(cls.name, "ray", "ray", "ray", python)

    def batches(self, batch_size: int, num_workers: int, seed: int) -> Iterator[dict]:
        if not self.ray.is_initialized():
            self.ray.init(num_cpus=max(num_workers, 1), include_dashboard=False, log_to_driver=False,
                          logging_level=logging.WARNING)
            self.ray.data.DataContext.get_current().enable_progress_bars = False
            logging.getLogger("ray.data").setLevel(logging.WARNING)  # its per-execution INFO lines
        dataset = self.ray.data.read_lerobot(self.root, episodes=self.config.episodes,
                                             delta_timestamps=self.config.delta_timestamps,
                                             frame_tolerance_s=self.config.tolerance_s)
        dataset = dataset.drop_columns([c for c in TEXT_COLUMNS if c in dataset.columns()])
        self._facts = {"reader": "ray.data.read_lerobot", "batches": "iter_torch_batches",
                       "local_shuffle_buffer_size": self.shuffle_buffer, "ray_num_cpus": max(num_workers, 1)}
        return iter(dataset.iter_torch_batches(batch_size=batch_size, local_shuffle_buffer_size=self.shuffle_buffer,
                                               local_shuffle_seed=seed))

    def facts(self) -> dict:
        return dict(self._facts)
