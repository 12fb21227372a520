"""Which frame each row of an episode gets, predicted up front from the files' frame times
(`dl.format.frame_times`), and the refusals when that frame would be wrong.

Two pairings (`LoaderConfig.frame_pairing`):

- "timestamp" (LeRobot's, the default): a row's camera query is its `timestamp` + the camera's `from_timestamp`;
  the frame is the nearest of the episode's own span, served when it is less than `tolerance_s` away. LeRobot
  0.4.4 and 0.6.1 take the nearest frame of the whole file, which past the span's ends is another episode's (or
  none past the file's end: they fail); dl holds the query within the episode.
- "row": row i of an episode gets frame i of its span, and `delta_timestamps` windows count frames. For recorded
  (wall-clock) timestamps that drift from the video while the video holds one frame per row: LeRobot's pairing
  then serves a late row a frame recorded after it, or the next episode's.

A refusal never suggests a `tolerance_s` of half a frame period or more (that would serve a row a neighbouring
frame); where only such a tolerance would serve LeRobot's values, it names the row pairing instead.
"""

import math

import numpy as np

from ..contracts.errors import DatasetFormatError, TimestampToleranceError, format_indices
from .frame_times import half_spacing, nearest, span_frames

PAIRINGS = ("timestamp", "row")
"""`LoaderConfig.frame_pairing`'s values."""
RATE_SLACK = 0.05
"""Relative difference between a median frame or row spacing and 1/fps above which they are at another rate than
info.json's fps (recorders drift by 1-2%; a wrong fps is off by 2x, 30 vs 15...)."""


def camera_span(meta, episode, key: str) -> tuple[np.ndarray, int, int] | None:
    """(the file's frame times, float64 [N] in s; the span's first frame; its end, exclusive) of camera `key`'s
    span of `episode`, or None when the file has no index (`dl.format.frame_times.FrameTimes.of`)."""
    span = episode.videos[key]
    times = meta.frame_times.of(meta, span.path)
    if times is None:
        return None
    first, end = span_frames(times, span.from_timestamp, span.to_timestamp, episode.length)
    return times, first, end


def span_bounds(first: int, end: int, count: int) -> tuple[int, int]:
    """Inclusive `(first, last)` positions a query is held within: the span's frames, or the file's frame nearest
    an empty span (a span past the file's end refuses elsewhere, `dl.format.streams`)."""
    last = min(max(end - 1, first), max(count - 1, 0))
    return min(first, last), last


def span_ends(meta, episode, key: str) -> tuple[float, float]:
    """The times (s, file timeline) of the first and last frame of `episode`'s span of camera `key`: from the
    file's index (`camera_span`), or, for a file without one (or a span that shows no frame), from_timestamp and
    one frame per row at info.json's fps."""
    found = camera_span(meta, episode, key)
    if found is None or found[2] == found[1]:
        start = episode.videos[key].from_timestamp
        return start, start + (episode.length - 1) / meta.fps
    times, first, end = found
    return float(times[first]), float(times[end - 1])


def frames_at_rate(meta, episode) -> bool:
    """Whether the files show info.json's fps right for `episode`: it has cameras and, for every one, the file has
    an index, the episode's span holds exactly one frame per row, and the file's median frame spacing is 1/fps
    within `RATE_SLACK`. Rows whose timestamps run at another rate then drift from the video; they do not show a
    wrong fps."""
    for key in episode.videos:
        found = camera_span(meta, episode, key)
        if found is None or found[2] - found[1] != episode.length:
            return False
        if abs(2 * half_spacing(found[0]) * meta.fps - 1) > RATE_SLACK:
            return False
    return bool(episode.videos)


def timestamp_gaps(meta, episode, timestamps: np.ndarray) -> tuple[float, int, str] | None:
    """The largest gap (s) between a row's camera query (`timestamp` + the camera's `from_timestamp`) and the
    nearest frame of the episode's own span of the file (the file's real frame times), with its row and camera;
    None without cameras (or without an index for any of them). A span that shows no frame (past the file's end)
    is left to the stream checks (`dl.format.streams.check_file`), which say so."""
    worst = None
    ts = np.asarray(timestamps, dtype=np.float64).reshape(-1)
    for key in episode.videos:
        found = camera_span(meta, episode, key)
        if found is None or not len(ts):
            continue
        times, first, end = found
        if end == first:
            continue
        lo, hi = span_bounds(first, end, len(times))
        _, gap = nearest(times, np.full(len(ts), lo), np.full(len(ts), hi), episode.videos[key].from_timestamp + ts)
        row = int(gap.argmax())
        if worst is None or gap[row] > worst[0]:
            worst = (float(gap[row]), row, key)
    return worst


def suggest_tolerance(gap: float) -> float:
    """A `tolerance_s` that serves a largest gap of `gap` s (LeRobot's test is gap < tolerance_s): the next 0.1 ms."""
    return (math.floor(gap * 1e4 + 1e-6) + 1) / 1e4


def drift(meta, episode, key: str, timestamps: np.ndarray) -> dict | None:
    """How camera `key`'s rows drift from their own frames, when its span holds exactly one frame per row: None
    otherwise. `{"drift_s": query - own frame's time at the last row (s), "frames": that in frame periods,
    "shift_s": the median of query - own frame's time (s), "away": the most frames LeRobot's pairing (the file's
    nearest frame) lies from a row's own frame,
    "other_episode": whether that frame lies outside the episode's span, "period": the span's frame period (s)}`."""
    found = camera_span(meta, episode, key)
    ts = np.asarray(timestamps, dtype=np.float64).reshape(-1)
    if found is None or found[2] - found[1] != len(ts) or not len(ts):
        return None
    times, first, end = found
    own = times[first:end]
    query = episode.videos[key].from_timestamp + ts
    period = float(np.median(np.diff(own))) if len(own) > 1 else 1.0
    which, _ = nearest(times, np.zeros(len(ts), np.int64), np.full(len(ts), len(times) - 1), query)
    away = which - np.arange(first, end)
    return {"drift_s": float(query[-1] - own[-1]), "frames": float((query[-1] - own[-1]) / period),
            "shift_s": float(np.median(query - own)),
            "away": int(np.abs(away).max()), "other_episode": bool(((which < first) | (which >= end)).any()),
            "period": period}


def check_tolerance(where: str, meta, episode, timestamps: np.ndarray, tolerance_s: float,
                    others: list[int] = ()) -> float:
    """Refuse an episode whose timestamps `tolerance_s` would not serve (`timestamp_gaps`); returns its largest gap.
    `others`: further episodes the tolerance would not serve (named in the message; this one has the largest gap).

    Raises:
        TimestampToleranceError: one line with the row, the gap, the drift of the rows from their own frames when
            the span holds one frame per row, and the fix: a `--tolerance-s` under half a frame period that would
            serve the episode(s), or `--frame-pairing row`, or fixing the timestamps.
    """
    found = timestamp_gaps(meta, episode, timestamps)
    if found is None or found[0] < tolerance_s:
        return 0.0 if found is None else found[0]
    gap, row, key = found
    ts = np.asarray(timestamps, dtype=np.float64).reshape(-1)
    times, first, end = camera_span(meta, episode, key)
    period = float(np.median(np.diff(times))) if len(times) > 1 else 1.0
    span = episode.videos[key]
    also = (f" The same holds for {len(others)} more episode(s) ({format_indices(list(others))}); this gap is the "
            "largest." if others else "")
    them = "them" if others else "it"
    head = (f"{where}: episode {episode.index}: row {row} (timestamp {ts[row]:.6f} s) is {gap:.6f} s from the nearest "
            f"frame of camera {key} in its span of {span.path}, more than tolerance_s={tolerance_s}.")
    moved = drift(meta, episode, key, ts)
    drifted = ""
    if moved is not None and abs(moved["drift_s"]) >= tolerance_s:
        lerobot = ("another episode's frames" if moved["other_episode"] else f"frames up to {moved['away']} away "
                   "from the row's own" if moved["away"] else "each row its own frame")
        shift = moved["shift_s"]
        shifted = (f"are shifted by {shift:+.6f} s ({shift / moved['period']:+.2f} frames) from those frames on the "
                   "median and " if abs(shift) >= tolerance_s else "")
        drifted = (f" Its video holds one frame per row, but its timestamps {shifted}drift from them to "
                   f"{moved['drift_s']:+.6f} s ({moved['frames']:+.2f} frames) by the episode's end; LeRobot's "
                   f"pairing (the file's nearest frame), at a tolerance_s that serves it, would serve {lerobot}.")
    outside = not (times[min(first, len(times) - 1)] - 0.5 * period <= span.from_timestamp + ts[row]
                   <= times[max(min(end, len(times)) - 1, 0)] + 0.5 * period)
    past = (" That row's timestamp lies outside the episode's frames: LeRobot would take another episode's frame "
            "there (or fail past the file's end); dl takes the episode's nearest own frame." if outside and not drifted
            else "")
    tolerance = suggest_tolerance(gap)
    if tolerance < 0.5 * period:
        fix = (f"--tolerance-s {tolerance} (tolerance_s={tolerance}) would serve {them}, each row getting the frame "
               "nearest its timestamp as in LeRobot; or fix the timestamps, or leave the episode out.")
    elif moved is not None:
        fix = ("--frame-pairing row (frame_pairing=\"row\") serves each row its own frame, with delta_timestamps "
               "windows counted in frames; a tolerance_s that large would serve rows other rows' frames.")
    else:
        fix = ("no tolerance_s under half a frame period serves it and its span does not hold one frame per row: fix "
               "the timestamps or meta/episodes' from_timestamp, or leave the episode out.")
    raise TimestampToleranceError(f"{head}{past}{drifted}{also} {fix}")


def check_pairing(where: str, meta, episode) -> None:
    """With `frame_pairing="row"`: every camera's span must hold exactly one frame per row.

    Raises:
        DatasetFormatError: naming the episode, the camera, the file and the counts.
    """
    for key, span in episode.videos.items():
        found = camera_span(meta, episode, key)
        if found is not None and found[2] - found[1] != episode.length:
            raise DatasetFormatError(
                f"{where}: episode {episode.index}: camera {key}'s span of {span.path} ([{span.from_timestamp:.6f}, "
                f"{span.to_timestamp:.6f}) s) holds {found[2] - found[1]} frames for {episode.length} rows; "
                "frame_pairing=\"row\" needs one frame per row. Pair by timestamp (the default) or leave the episode "
                "out.")


def row_times(meta, episode, key: str) -> np.ndarray | None:
    """float64 [length]: with `frame_pairing="row"`, each row's query on the episode's timeline (its own frame's time
    less the span's `from_timestamp`), or None when the file has no index."""
    found = camera_span(meta, episode, key)
    if found is None:
        return None
    times, first, end = found
    return times[first:end] - episode.videos[key].from_timestamp
