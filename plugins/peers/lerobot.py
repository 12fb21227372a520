"""Loaders `lerobot` and `lerobot_stream` (`--loader lerobot-stream`): LeRobot's own `LeRobotDataset` and
`StreamingLeRobotDataset`, read as lerobot-train reads them, under dl's benchmark."""

import functools

import torch.utils.data

from dl.contracts.config import LoaderConfig
from dl.contracts.decoder import Decoder
from dl.contracts.errors import PluginError
from dl.format.metadata import DatasetMeta
from dl.kits.process_local import ProcessLocal

from .common import MapPeer, PeerBase
from .environments import import_peer, interpreter_for


def _reader_arguments(peer: PeerBase, config: LoaderConfig) -> dict:
    return {"repo_id": peer.repo_id, "root": peer.root, "episodes": config.episodes,
            "delta_timestamps": config.delta_timestamps, "tolerance_s": config.tolerance_s,
            "return_uint8": config.image_dtype == "uint8"}


class LeRobotPeer(MapPeer):
    """LeRobot's map-style `LeRobotDataset` over the same folder, episodes, delta_timestamps and tolerance, uint8
    or float32 frames as the run asks; the DataLoader shuffles it with a seeded `RandomSampler`, batches with
    torch's `default_collate` and starts its workers with `spawn`, as lerobot-train 0.6.1 does (`shuffle=True`, its
    default `dataloader_multiprocessing_context`).

    Args:
        python: the interpreter of an environment with LeRobot and dl (default: this one if it imports LeRobot,
            else the peers' `venv06`, `dl.plugins.peers.environments`).

    Raises:
        PluginError: LeRobot is not installed (one line naming the extra), or as `PeerBase`.
    """

    name, distribution = "lerobot", "lerobot"
    order = "torch RandomSampler (global shuffle), as lerobot-train"
    shuffled = True
    start_method = "spawn"  # lerobot-train's default (its `dataloader_multiprocessing_context`)

    def __init__(self, meta: DatasetMeta, decoder: Decoder, config: LoaderConfig, python: str | None = None):
        super().__init__(meta, decoder, config)
        module = import_peer(self.name, "lerobot.datasets.lerobot_dataset", "lerobot")
        self.reader = module.LeRobotDataset(**_reader_arguments(self, config))

    @classmethod
    def interpreter(cls, python: str | None = None) -> str | None:
        return interpreter_for(cls.name, "lerobot", "venv06", "lerobot", python)


def index_times_mismatch(peer: PeerBase) -> str | None:
    """One line when StreamingLeRobotDataset would read other frames than the dataset's: LeRobot 0.6.1's streaming
    reader takes a frame's time in its video file as its global `index` / fps (`StreamingLeRobotDataset.make_frame`),
    which holds only where an episode's span in its video file starts at its first global index / fps (one file per
    camera from the dataset's first frame, at a constant rate). None when every selected episode's spans do."""
    fps = peer.meta.fps
    for episode in peer.episodes:
        for key, span in episode.videos.items():
            expected = episode.dataset_from_index / fps
            if abs(span.from_timestamp - expected) > max(peer.config.tolerance_s, 0.5 / fps):
                return (f"loader lerobot_stream: LeRobot's StreamingLeRobotDataset reads frame `index` at index / fps "
                        f"seconds into its video file, but episode {episode.index}'s {key} starts at "
                        f"{span.from_timestamp:g} s in {span.path}, not {expected:g} s: it would fail or serve other "
                        "frames on this dataset. Use --loader lerobot (LeRobotDataset) to compare with LeRobot.")
    return None


class LeRobotStreamPeer(PeerBase, torch.utils.data.IterableDataset):
    """LeRobot's `StreamingLeRobotDataset` over the same folder: its shuffle buffer (`buffer_size` samples, seeded by
    the run's seed) over its shards, split among DataLoader workers by Hugging Face `datasets`.

    Args:
        buffer_size: its shuffle buffer, in samples (LeRobot's default, 1000).
        python: as `LeRobotPeer`.

    Raises:
        PluginError: as `LeRobotPeer`, or the dataset has an episode it would read other frames of
            (`index_times_mismatch`).
    """

    name, distribution = "lerobot_stream", "lerobot"
    shuffled = True
    start_method = "spawn"

    def __init__(self, meta: DatasetMeta, decoder: Decoder, config: LoaderConfig, buffer_size: int = 1000,
                 python: str | None = None):
        super().__init__(meta, decoder, config)
        mismatch = index_times_mismatch(self)
        if mismatch:
            raise PluginError(mismatch)
        module = import_peer(self.name, "lerobot.datasets.streaming_dataset", "lerobot")
        self.order = f"StreamingLeRobotDataset's shuffle buffer ({buffer_size} samples) over its shards"
        # each process its own reader, as each of lerobot-train's spawned workers unpickles a fresh one: one iterated
        # here (the benchmark's single-process pass) holds a decoder cache with a lock, which does not pickle
        self.reader = ProcessLocal(functools.partial(module.StreamingLeRobotDataset, **_reader_arguments(self, config),
                                                     buffer_size=buffer_size, seed=config.seed, shuffle=True))
        self.reader.get()  # its errors (a dataset it refuses) here, not in a worker

    @classmethod
    def interpreter(cls, buffer_size: int = 1000, python: str | None = None) -> str | None:
        return interpreter_for(cls.name, "lerobot", "venv06", "lerobot", python)

    def __iter__(self):
        return iter(self.reader.get())
