"""The embedded default dataset `dl run` benchmarks when no --root is given: generated once into dl's cache
folder by `dl.testing.synthetic`."""

import pathlib
from collections.abc import Callable

from ..kits.paths import cache_dir
from ..testing.synthetic import SyntheticConfig, write_synthetic_dataset

DATASET_TAG = "v3.0-s1"  # names the default dataset's cache folder; bump when generated content changes

DEFAULT_CONFIG = SyntheticConfig()  # the embedded default dataset; bump DATASET_TAG when changing it


def default_dataset_root() -> pathlib.Path:
    """Folder of the embedded default dataset: ``datasets/default-<DATASET_TAG>`` in dl's cache folder
    (``$DL_CACHE_DIR``, else ``$XDG_CACHE_HOME/dl`` or ``~/.cache/dl``; see ``dl.kits.paths``)."""
    return cache_dir("datasets") / f"default-{DATASET_TAG}"


def ensure_default_dataset(progress: Callable[[int, int], None] | None = None) -> pathlib.Path:
    """Return ``default_dataset_root()``, generating it from ``DEFAULT_CONFIG`` on first use (~6 s).

    Safe when processes race: the loser of the final rename discards its copy and returns the winner's.
    Raises ``FileExistsError`` if the folder holds something else (no meta/info.json), ``RuntimeError``
    if ffmpeg is missing or fails.
    """
    root = default_dataset_root()
    if (root / "meta" / "info.json").is_file():
        return root
    try:
        return write_synthetic_dataset(root, DEFAULT_CONFIG, progress=progress)
    except FileExistsError:
        if (root / "meta" / "info.json").is_file():
            return root
        raise
