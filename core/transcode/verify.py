"""A re-encoded video file against the dataset's data rows: the same number of frames as the original, and for each
episode it holds, frames whose times match the episode's row timestamps; the new `from_timestamp` and
`to_timestamp` come from those frame times (LeRobot's convention: from the episode's first frame to the end of its
last, one frame period after it)."""

from dataclasses import dataclass

import numpy as np

from .ffmpeg import Frames, TranscodeError


@dataclass(frozen=True)
class EpisodeRows:
    """One episode's part of a video file: its `index`, its `from_timestamp` in the original file (s) and its data
    rows' `timestamp` column (float64 [length], seconds from the episode's start)."""

    index: int
    from_timestamp: float
    timestamps: np.ndarray


def episode_start(frames: Frames, from_timestamp: float, tolerance_s: float) -> int | None:
    """The index of the frame shown at `from_timestamp` (within `tolerance_s`), or None."""
    k = int(np.argmin(np.abs(frames.pts_s - from_timestamp)))
    return k if abs(frames.pts_s[k] - from_timestamp) < tolerance_s else None


def worst_offset(frames: Frames, start: int, timestamps: np.ndarray) -> tuple[int, float]:
    """(row, seconds) of the row whose frame lies farthest from `frames.pts_s[start] + timestamp`: the episode's
    frames taken in order from `start`, one per row (the caller checks there are enough)."""
    offsets = np.abs(frames.pts_s[start:start + len(timestamps)] - (frames.pts_s[start] + timestamps))
    row = int(np.argmax(offsets))
    return row, float(offsets[row])


def new_spans(path: str, old: Frames, new: Frames, episodes: list[EpisodeRows], fps: int,
              tolerance_s: float) -> dict[int, tuple[float, float]]:
    """Each episode's `(from_timestamp, to_timestamp)` in the re-encoded file `path`, after checking it: as many
    frames as the original, every episode starting on a frame of the original and its rows' timestamps matching
    the frames that follow, in both files, within `tolerance_s`.

    Args:
        old, new: the original's and the re-encoded file's frames (`dl.transcode.ffmpeg.frames_of`).
        episodes: the episodes whose frames the file holds.
        fps: the dataset's frame rate (the last episode of a file ends one frame period after its last frame).

    Raises:
        TranscodeError: a count or a time does not match; the message names the file and the episode.
    """
    if len(new.pts_s) != len(old.pts_s):
        raise TranscodeError(f"{path}: the re-encoded file has {len(new.pts_s)} frames, the original "
                             f"{len(old.pts_s)}; FFmpeg dropped or duplicated frames. Report this with the file.")
    out = {}
    for ep in episodes:
        start = episode_start(old, ep.from_timestamp, tolerance_s)
        if start is None:
            raise TranscodeError(f"{path}: episode {ep.index} starts at {ep.from_timestamp:.6f} s in meta/episodes, "
                                 "where the original video shows no frame; the source dataset is inconsistent (run "
                                 "`dl validate` on it) and cannot be transcoded as it is.")
        end = start + len(ep.timestamps)
        if end > len(new.pts_s):
            raise TranscodeError(f"{path}: episode {ep.index} has {len(ep.timestamps)} rows but the video holds "
                                 f"{len(new.pts_s) - start} frames from its start; the source video is too short "
                                 "(run `dl validate` on the source).")
        for which, frames in (("original", old), ("re-encoded", new)):
            row, offset = worst_offset(frames, start, ep.timestamps)
            if offset >= tolerance_s:
                raise TranscodeError(f"{path}: episode {ep.index}, row {row}: the {which} file's frame lies "
                                     f"{offset:.6f} s from the row's timestamp (tolerance {tolerance_s} s)."
                                     + (" The source dataset's video and rows disagree: run `dl validate` on it."
                                        if which == "original" else " Report this with the file."))
        to = float(new.pts_s[end]) if end < len(new.pts_s) else float(new.pts_s[end - 1]) + 1 / fps
        out[ep.index] = (float(new.pts_s[start]), to)
    return out
