"""The keyframe grid of an episode's videos, so the pool's automatic chunk length can follow it.

A chunk that starts between keyframes costs the decoder every frame from the keyframe before it: on open50
(MPEG-4, a keyframe every 12 frames), 9-frame chunks start 0, 3, 6 or 9 frames past a keyframe and decode 1.5
frames per frame they deliver; 12-frame chunks start on keyframes and decode each frame once. LeRobot encodes
each episode on its own (its recorder, and its v2.1 -> v3.0 converter concatenates those files), so an
episode's first frame is a keyframe and its keyframes lie every GOP frames from there; chunks of rows
`r // chunk_frames` then start on keyframes when `chunk_frames` is a multiple of the GOP.

The grid is read from each camera's MP4 index (the source's, `dl.kits.video_indexes`: parsed from the `moov` box with
a few ranged reads unless the host already did, the whole file never), of one episode: the dataset's cameras are
encoded alike.
"""

import math
from functools import partial

import numpy as np

from dl.format.metadata import DatasetMeta, EpisodeMeta
from dl.kits.mp4_index import Mp4IndexError
from dl.kits.video_indexes import indexes_of

ON_GRID_SHARE = 0.9
"""The share of an episode's grid positions (0, g, 2g, ...) that must be keyframes for GOP g to count as its grid
(an encoder may leave out or move a few at scene cuts; extra keyframes do no harm)."""


def episode_gop(meta: DatasetMeta, episode: EpisodeMeta) -> int | None:
    """The frames between keyframes that every camera of `episode` keeps from the episode's first frame (the
    least common multiple of the cameras' GOPs), or None when there is no such grid: a camera whose track has
    B-frames (decode order is not display order), whose episode does not start on a keyframe, holds a single
    keyframe, or whose keyframes do not lie every g frames (at least `ON_GRID_SHARE` of the positions), or whose
    file is no MP4 this reader can index (fragmented, Matroska). Never raises for the file's content: without a
    grid the caller picks a length as before; a file that is missing raises as any read does.

    Raises:
        SourceFileNotFoundError, dl.kits.remote.retry.RemoteReadError: the reads fail.
    """
    gops = []
    for video in episode.videos.values():
        size = meta.files.get(video.path)
        if size is None:
            return None
        index = indexes_of(meta.source).get(video.path, size, partial(meta.source.read_bytes, video.path),
                                            f"{meta.source.url}/{video.path}")
        if index is None or index.reorder_depth:
            return None
        try:
            _, _, first, last = index.decode_span(video.from_timestamp, video.to_timestamp)
        except Mp4IndexError:
            return None
        gop = grid_gop(np.flatnonzero(index.keyframes[first:last + 1]), last - first + 1)
        if gop is None:
            return None
        gops.append(gop)
    return math.lcm(*gops) if gops else None


def grid_gop(keyframes: np.ndarray, frames: int) -> int | None:
    """The GOP g of an episode of `frames` frames whose keyframes are at positions `keyframes` (int, ascending,
    from its first frame): the most common gap between them, when position 0 is a keyframe and at least
    `ON_GRID_SHARE` of the positions 0, g, 2g, ... < frames are; None otherwise (or with a single keyframe)."""
    if len(keyframes) < 2 or keyframes[0] != 0:
        return None
    gop = int(np.bincount(np.diff(keyframes)).argmax())
    grid = np.arange(0, frames, gop)
    return gop if np.isin(grid, keyframes).mean() >= ON_GRID_SHARE else None
