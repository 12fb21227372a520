"""Whether torchcodec's "approximate" seek mode places a file's frames where they are: that mode maps frame i to
`i / average_fps` of the header, so it decodes the wrong frame of a stream whose frames lie off that grid
(recordings concatenated at durations that are not whole frames, variable frame rates), which its "exact" mode
(one scan of the file) decodes right. The frames' times come from the file's MP4 index (`dl.kits.mp4_index`)."""

import os

import numpy as np

from ..mp4_index import Mp4IndexError, read_index

GRID_SLACK_S = 1e-6
"""How far (s) a frame's presentation time may lie from `i / average_fps` and count as on the grid."""


def frames_on_grid(video, meta) -> bool | None:
    """Whether every shown frame of the file (presentation time >= 0, after its edit list) lies at
    `i / average_fps_from_header` within `GRID_SLACK_S`, as many as the file shows; None when the file has no MP4
    index this reader can read (fragmented MP4, Matroska) or no header rate.

    Args:
        video: what `Source.video_input` gave for the file: a local path or a seekable file object (closed here).
        meta: the torchcodec `VideoStreamMetadata` of the file.
    """
    fps = meta.average_fps_from_header
    if not fps:
        return None
    try:
        times = np.sort(_index_of(video).pts_s)
    except (Mp4IndexError, OSError):
        return None
    times = times[times >= 0]
    return bool(np.abs(times - np.arange(len(times)) / fps).max(initial=0.0) < GRID_SLACK_S)


def _index_of(video):
    if isinstance(video, str | os.PathLike):
        with open(video, "rb") as f:
            return _index_of(f)

    def read(start: int, end: int) -> bytes:
        video.seek(start)
        return video.read(end - start)

    try:
        return read_index(read, video.seek(0, os.SEEK_END))
    finally:
        video.close()
