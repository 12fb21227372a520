"""The selection screen's per-episode results (`dl.format.selection_checks`), kept in dl's cache folder
(`screens/`) so a later open of the same rows, metadata and videos skips the screen: the map loader's start-up on a
large selection is then reading one small file instead of a pass over every row.

A kept screen is found by a digest of everything the screen reads: the rows (named by the map loader's tabular
store, itself keyed by the data files' fingerprints and each episode's index, length, first index and file), the
fps, features and task tables of the metadata, each selected episode's camera spans and the fingerprints of their
video files (whose frame times the screen compares the rows with), `RATE_SLACK` and `SCREEN_VERSION`. Anything
else changed gives another digest, and the screen runs again. Written under a temporary name and renamed
(concurrent writers are safe); the folder is kept under `LIMIT_BYTES`, least recently used first.
"""

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from ..kits import lru_folder
from ..kits.paths import cache_dir
from .timestamp_checks import RATE_SLACK

SCREEN_VERSION = 1
"""Part of every kept screen's digest: raised when what the screen computes changes."""
LIMIT_BYTES = 256 << 20
SUFFIX = ".npz"

Screened = tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]
"""(bool [E] episodes suspected wrong, float64 [E] largest camera gap in s, {float key: int64 [E] NaN/inf values})."""


def screen_path(meta, episodes, rows: str) -> Path:
    """Where the screen of `episodes` (an `EpisodeSelection`) over the rows named `rows` (the tabular store's file)
    is kept."""
    columns, positions = episodes.columns, episodes.positions
    digest = hashlib.sha256(json.dumps([SCREEN_VERSION, RATE_SLACK, rows, meta.fps, meta.features, sorted(meta.tasks),
                                        sorted(meta.subtasks), meta.video_keys], default=str).encode())
    for key in meta.video_keys:
        files = columns.video_file[key][positions]
        for array in (files, columns.from_timestamp[key][positions], columns.to_timestamp[key][positions]):
            digest.update(np.ascontiguousarray(array).tobytes())
        paths = [columns.video_paths[key][f] for f in np.unique(files).tolist()]
        digest.update(json.dumps([(p, meta.source.fingerprint(p) if p in meta.files else None)
                                  for p in paths]).encode())
    return cache_dir("screens") / f"{digest.hexdigest()[:32]}{SUFFIX}"


def load(path: Path, count: int) -> Screened | None:
    """The screen kept at `path` for `count` episodes, or None when there is none (not kept yet, evicted,
    unreadable)."""
    try:
        with np.load(path) as kept:
            suspect, gaps = kept["suspect"], kept["gaps"]
            nonfinite = {name.removeprefix("nonfinite/"): kept[name] for name in kept.files
                         if name.startswith("nonfinite/")}
    except (OSError, ValueError, KeyError):
        return None
    if len(suspect) != count or len(gaps) != count:
        return None
    lru_folder.touch(path)
    return suspect, gaps, nonfinite


def keep(path: Path, screened: Screened) -> None:
    """Keep `screened` at `path`; a full or read-only cache folder keeps nothing (the screen runs again)."""
    suspect, gaps, nonfinite = screened
    temp = lru_folder.temp_path(path)
    try:
        with open(temp, "wb") as out:
            np.savez(out, suspect=suspect, gaps=gaps, **{f"nonfinite/{k}": v for k, v in nonfinite.items()})
        os.replace(temp, path)
    except OSError:
        lru_folder.discard(temp)
        return
    lru_folder.evict(path.parent, SUFFIX, LIMIT_BYTES, keep=path)
