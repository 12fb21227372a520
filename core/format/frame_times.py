"""Each video file's frame presentation times, read from the file's MP4 index, and the frame an episode's row gets.

A row's camera frame is the one whose presentation time is nearest the row's query, `from_timestamp` + the row's
`timestamp` (LeRobot's `_query_videos`), served when it is less than `tolerance_s` away. Which frames a file holds,
and when, is read from its container index (the source's one index per file, `dl.kits.video_indexes`: sample tables,
composition offsets, the edit list), never assumed: files concatenated from recordings whose durations are not whole
frames, 29.97 fps cameras, variable frame rates, edit lists and B-frames all put frames off a 1/fps grid of the file's
timeline.

`FrameTimes` holds the times of every file read so far; the process that builds a loader reads those of its
selection once (`FrameTimes.load`, a few ranged reads per file, threaded), and the times travel to workers and
ranks with the dataset's metadata (`DatasetMeta.frame_times`). Each file's times are kept in dl's cache folder
(`frame_times/`, keyed by the source, the file and its fingerprint: size plus content hash or modification time),
so a later run reads one small file instead of the video's index. A file the index reader cannot read
(fragmented, Matroska) has no times: its rows are checked against the decoded frames only, when they are decoded.
"""

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..kits import lru_folder
from ..kits.paths import cache_dir
from ..kits.video_indexes import indexes_of
from .load_times import timed

INDEX_THREADS = 16
"""Files indexed at once by `FrameTimes.load` (each costs one or two reads)."""
CACHE_LIMIT_BYTES = 1 << 30
"""dl's cache folder `frame_times/` is kept under this size, least recently used files deleted first."""
CACHE_VERSION = 1
"""Part of every kept file's key: raised when what is kept changes meaning."""
SUFFIX = ".f64"


class FrameTimes:
    """`{video file: float64 [N] its frames' presentation times in s, ascending}` for the files read so far, and
    `{video file: why}` for those that cannot be indexed."""

    def __init__(self):
        self.times: dict[str, np.ndarray] = {}
        self.unindexed: dict[str, str] = {}

    def load(self, meta, paths) -> None:
        """Get the times of each of `paths` (relative video paths of `meta`'s dataset) not got yet: from dl's cache
        folder, else from the file's MP4 index, one file after another from a local source (threads would only
        contend for the GIL), `INDEX_THREADS` at once from a remote one (each read waits on the network). A file
        the index reader refuses is recorded in `unindexed`.

        Raises:
            SourceFileNotFoundError, dl.kits.remote.retry.RemoteReadError: a read fails.
        """
        todo = sorted({p for p in paths if p not in self.times and p not in self.unindexed})
        if not todo:  # `of` asks once per episode: nothing to look up
            return
        with timed(meta, "index_reads"):
            self._load(meta, todo)

    def _load(self, meta, todo: list[str]) -> None:
        """`load` of the files `todo`, none got yet."""
        folder = cache_dir("frame_times")
        kept = {path: _kept_path(meta, path, folder) for path in todo}
        for path in todo:
            times = _load_kept(kept[path])
            if times is not None:
                self.times[path] = times
        todo = [p for p in todo if p not in self.times]
        if not todo:
            return
        if len(todo) == 1 or meta.source.is_local:
            found = [_read_times(meta, path, kept[path]) for path in todo]
        else:
            with ThreadPoolExecutor(min(INDEX_THREADS, len(todo)), thread_name_prefix="dl-frame-times") as pool:
                found = list(pool.map(lambda p: _read_times(meta, p, kept[p]), todo))
        for path, times in zip(todo, found, strict=True):
            if isinstance(times, str):
                self.unindexed[path] = times
            else:
                self.times[path] = times
        lru_folder.evict(folder, SUFFIX, CACHE_LIMIT_BYTES, keep="")

    def of(self, meta, path: str) -> np.ndarray | None:
        """The frame times of video file `path` (read now when this process has not got them), or None when the
        file cannot be indexed."""
        if path not in self.times and path not in self.unindexed:
            self.load(meta, [path])
        return self.times.get(path)


def load_selection(meta, episodes) -> None:
    """Read the frame times of every video file `episodes` (a sequence of `EpisodeMeta`, or an `EpisodeSelection`)
    use into `meta.frame_times`, as the process that builds a loader does, once."""
    columns, positions = getattr(episodes, "columns", None), getattr(episodes, "positions", None)
    paths: set[str] = set()
    for key in meta.video_keys:
        if columns is not None:
            paths.update(columns.video_paths[key][f] for f in np.unique(columns.video_file[key][positions]).tolist())
        else:
            paths.update(ep.videos[key].path for ep in episodes if key in ep.videos)
    meta.frame_times.load(meta, paths)


def _kept_path(meta, path: str, folder: Path) -> Path | None:
    """Where `folder` (dl's cache folder `frame_times/`) keeps `path`'s frame times, or None for a file the dataset
    does not list."""
    if path not in meta.files:
        return None
    key = json.dumps([CACHE_VERSION, meta.source.url, path, meta.source.fingerprint(path)])
    return folder / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}{SUFFIX}"


def _load_kept(kept: Path | None) -> np.ndarray | None:
    """The frame times kept at `kept` (float64, raw), or None when none are (not read yet, or evicted)."""
    if kept is None:
        return None
    try:
        times = np.fromfile(kept, dtype=np.float64)
    except OSError:  # not there (or not readable): the index is read
        return None
    lru_folder.touch(kept)
    return times


def _read_times(meta, path: str, kept: Path | None) -> np.ndarray | str:
    """`path`'s frame times from its MP4 index (the source's, `dl.kits.video_indexes`: parsed now through ranged
    reads unless held), then kept at `kept` (written under a temporary name and renamed), or why the file has none."""
    if kept is None:
        return f"{path} is not listed in the dataset's files"
    indexes = indexes_of(meta.source)
    index = indexes.get(path, meta.files[path], lambda start, end: meta.source.read_bytes(path, start, end),
                        f"{meta.source.url}/{path}")
    if index is None:
        return indexes.unindexed[path]
    times = np.sort(index.pts_s)
    times = times[times >= 0]  # FFmpeg's mov demuxer drops the samples an edit list starts after
    temp = lru_folder.temp_path(kept)
    try:
        times.astype(np.float64).tofile(temp)
        os.replace(temp, kept)
    except OSError:  # a full or read-only cache folder: the times are read again next time
        lru_folder.discard(temp)
    return times


def half_spacing(times: np.ndarray) -> float:
    """Half the median spacing (s) of a file's frames: a timestamp within it of a bound counts as on it."""
    return 0.5 * float(np.median(np.diff(times))) if len(times) > 1 else 0.5


def span_frames(times: np.ndarray, from_s: float, to_s: float, length: int) -> tuple[int, int]:
    """`[first, end)`: the positions in `times` (a file's frame times) of the frames an episode's span
    `[from_s, to_s)` shows (a frame within half a frame period of a bound counts as inside, as meta/episodes
    rounds them); a span whose `to_s` leaves out one frame of its `length` rows (as some writers end it) keeps
    that frame. Empty (`first == end`) when the span shows no frame."""
    half = half_spacing(times)
    first, end = np.searchsorted(times, [from_s - half, to_s - half]).tolist()
    if end - first == length - 1 and end < len(times):
        end += 1
    return first, max(end, first)


def nearest(times: np.ndarray, first: np.ndarray, last: np.ndarray, query: np.ndarray) -> tuple[np.ndarray,
                                                                                             np.ndarray]:
    """For each query (s, float64 [R]), the position of the nearest of `times[first..last]` (its row's own span,
    int [R] inclusive bounds) and its distance in s: (int64 [R], float64 [R])."""
    right = np.clip(np.searchsorted(times, query), first, last)
    left = np.clip(right - 1, first, last)
    with np.errstate(invalid="ignore"):
        take_left = np.abs(query - times[left]) <= np.abs(times[right] - query)
    which = np.where(take_left, left, right)
    return which, np.abs(query - times[which])
