"""Whether torchcodec's "approximate" seek mode decodes the frame asked for at every position of a file, read from
the file's MP4 index (the source's, `dl.kits.video_indexes`) rather than assumed. That mode maps frame i to
`i / average_fps` of the header and seeks to the keyframe before it, so it decodes the wrong frame of a stream
- whose frames lie off that grid (recordings concatenated at durations that are not whole frames, variable frame
  rates): `frames_on_grid`;
- with leading pictures (open GOPs): after a seek to a keyframe FFmpeg drops the pictures shown before it, so a seek to
  one of them returns the next frame: `leading_pictures`.
Its "exact" mode (one scan of the file on open) decodes both right."""

import os

import numpy as np

from ..mp4_index import SampleIndex
from ..video_indexes import VideoIndexes, indexes_of

GRID_SLACK_S = 1e-6
"""How far (s) a frame's presentation time may lie from `i / average_fps` and count as on the grid."""


def approximate_places_frames(source, path: str, meta) -> bool | None:
    """Whether "approximate" seeking decodes the right frame everywhere in the file: its frames on the header's grid
    and no leading pictures; None when the file has no MP4 index this reader can read (fragmented MP4, Matroska) or
    its index cannot be read.

    Args:
        source: the `dl.Source` holding the file; its index is the source's (`dl.kits.video_indexes`), parsed
            through `source.video_input(path)` unless held.
        path: the video file, relative to the source's root.
        meta: the torchcodec `VideoStreamMetadata` of the file.
    """
    indexes = indexes_of(source)
    if not indexes.known(path):
        try:
            index_through(indexes, path, source.video_input(path), f"{source.url}/{path}")
        except OSError:
            return None
    index = indexes.found.get(path)
    if index is None:
        return None
    return frames_on_grid(index, meta.average_fps_from_header) and not leading_pictures(index)


def frames_on_grid(index: SampleIndex, fps: float | None) -> bool:
    """Whether every shown frame (presentation time >= 0, after the edit list) lies at `i / fps` within
    `GRID_SLACK_S`, as many as the track shows; False without a rate."""
    if not fps:
        return False
    times = np.sort(index.pts_s)
    times = times[times >= 0]
    return bool(np.abs(times - np.arange(len(times)) / fps).max(initial=0.0) < GRID_SLACK_S)


def leading_pictures(index: SampleIndex) -> bool:
    """Whether a track has leading pictures: a sample that follows a keyframe in decode order but is shown before it
    (an open GOP: HEVC's RASL pictures after a CRA keyframe, x265's default, and what LeRobot 0.6's lossless 12-bit
    depth streams hold; H.264 with x264's `open-gop`). torchcodec's exact mode seeks by the scanned presentation times
    and is right there; `tests/test_open_gop.py` shows the approximate mode's wrong frames."""
    if not len(index.pts):
        return False
    last_key = np.maximum.accumulate(np.where(index.keyframes, np.arange(len(index.pts)), 0))
    return bool((index.pts < index.pts[last_key]).any())


def index_through(indexes: VideoIndexes, path: str, video, name: str) -> SampleIndex | None:
    """`indexes.get` for `path`, read through what `Source.video_input` gave: a local path, or a seekable file object
    (closed after); `name`: the file in messages.

    Raises:
        OSError: the file cannot be read.
    """
    if isinstance(video, str | os.PathLike):
        with open(video, "rb") as f:
            return index_through(indexes, path, f, name)

    def read(start: int, end: int) -> bytes:
        video.seek(start)
        parts, left = [], end - start
        while left > 0:  # a raw file object (a remote source's view) may return less than asked
            part = video.read(left)
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)

    try:
        return indexes.get(path, video.seek(0, os.SEEK_END), read, name)
    finally:
        video.close()
