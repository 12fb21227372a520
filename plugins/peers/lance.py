"""Loader `lance`: lerobot-lancedb's `LanceDBDataset`, over a Lance copy of the dataset that
`lerobot-lance-convert` writes once into dl's cache folder."""

import hashlib
import json
from pathlib import Path

from filelock import FileLock

from dl.contracts.config import LoaderConfig
from dl.contracts.decoder import Decoder
from dl.contracts.errors import PluginError
from dl.format.metadata import DatasetMeta
from dl.kits.paths import cache_dir

from .common import MapPeer
from .environments import import_peer, interpreter_for


def converted_root(root: str) -> Path:
    """The Lance copy of the v3.0 dataset at `root` in dl's cache folder, keyed by the root and its
    meta/info.json (a changed dataset gets a new copy)."""
    info = Path(root, "meta", "info.json")
    key = hashlib.sha1(f"{Path(root).resolve()}\0{info.stat().st_mtime_ns}\0{info.stat().st_size}".encode())
    return cache_dir("peers", "lance") / f"{Path(root).name}-{key.hexdigest()[:12]}"


class LancePeer(MapPeer):
    """lerobot-lancedb's map-style `LanceDBDataset` (its batched `__getitems__` kept) over a Lance copy of the dataset,
    converted once with its own converter (`lerobot_lancedb.convert.convert`, what `lerobot-lance-convert --root`
    runs) under a file lock; read as its docs say: the DataLoader shuffles it, workers start with
    `lerobot_lancedb.lance_mp_context()` (forkserver).

    Args:
        python: the interpreter of an environment with lerobot-lancedb and dl (default: this one if it imports it,
            else the peers' `lance` venv).

    Raises:
        PluginError: lerobot-lancedb is not installed, or it refuses the dataset (its message, in one line).
    """

    name, distribution = "lance", "lerobot-lancedb"
    order = "torch RandomSampler (global shuffle), as LanceDBDataset's docs"
    shuffled = True

    def __init__(self, meta: DatasetMeta, decoder: Decoder, config: LoaderConfig, python: str | None = None):
        super().__init__(meta, decoder, config)
        reader = import_peer(self.name, "lerobot_lancedb.reader", "lance")
        self.start_method = reader.lance_mp_context()
        out = converted_root(self.root)
        try:
            self._convert(out)
            self.reader = reader.LanceDBDataset(root=str(out), episodes=config.episodes,
                                                delta_timestamps=config.delta_timestamps,
                                                tolerance_s=config.tolerance_s,
                                                return_uint8=config.image_dtype == "uint8")
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise PluginError(f"loader lance refuses {self.root}: {type(exc).__name__}: "
                              f"{' '.join(str(exc).split())[:300]}") from None

    def _convert(self, out: Path) -> None:
        done = out / "dl_converted.json"
        with FileLock(str(out) + ".lock"):
            if done.is_file():
                return
            convert = import_peer(self.name, "lerobot_lancedb.convert", "lance").convert
            convert(out, root=Path(self.root))
            done.write_text(json.dumps({"root": self.root}))

    @classmethod
    def interpreter(cls, python: str | None = None) -> str | None:
        return interpreter_for(cls.name, "lerobot_lancedb", "lance", "lance", python)

    def __getitems__(self, indices: list[int]) -> list[dict]:
        return self.reader.__getitems__(indices)
