"""Checks of an episode's rows, run where a loader reads them and by `dl validate`, so that wrong data is refused
instead of served.

The rule: where values would be wrong (a sample would carry another frame, another episode's rows, a window of the
wrong span) or LeRobot would crash, refuse with an error naming the file, the episode and what to do; where LeRobot
serves the data and the values are what is stored, warn once (`dl.contracts.errors.warn`), naming what was found.

Timestamps follow LeRobot 0.4.x's `tolerance_s`: a row's camera frame is the one whose presentation time is nearest
the row's `timestamp` plus the camera's `from_timestamp`, served when it is less than `tolerance_s` away. Recorded
(wall-clock) timestamps, offset and drifting from `frame_index / fps`, are served when the tolerance allows;
`timestamp_gaps` finds the largest gap up front, so a dataset the tolerance would not serve is refused before a
run with the `tolerance_s` that would serve it.
"""

import math

import numpy as np

from ..contracts.errors import DatasetFormatError, TimestampToleranceError, format_indices, warn
from .features import NUMERIC_DTYPES

RATE_SLACK = 0.05
"""Relative difference between the timestamps' median spacing and 1/fps above which info.json's fps is taken as
wrong (recorders drift by 1-2%; a wrong fps is off by 2x, 30 vs 15...)."""


def check_episode_rows(where: str, episode, fps: float, arrays: dict) -> None:
    """Check one episode's rows: every `episode_index` is the episode's, `frame_index` counts 0, 1, ...,
    length - 1 (LeRobot's writers number them so), and the timestamps are finite and spaced at about 1/fps
    (`RATE_SLACK`): a wrong `fps` in info.json would give every `delta_timestamps` window the wrong span.

    Raises:
        DatasetFormatError: naming `where` (the data file), the episode, the row and the fix.
    """
    owners = np.asarray(arrays["episode_index"]).reshape(-1)
    if len(owners) and not (owners == episode.index).all():
        row = int(np.flatnonzero(owners != episode.index)[0])
        raise DatasetFormatError(f"{where}: episode {episode.index}: row {row} has episode_index {int(owners[row])}. "
                                 "meta/episodes and the data disagree; restore them from the dataset's origin.")
    frame_index = np.asarray(arrays["frame_index"]).reshape(-1)
    expected = np.arange(len(frame_index))
    if not np.array_equal(frame_index, expected):
        bad = int(np.flatnonzero(frame_index != expected)[0])
        raise DatasetFormatError(f"{where}: episode {episode.index} has frame_index {int(frame_index[bad])} at row "
                                 f"{bad}; frame_index must count 0, 1, 2, ... within each episode.")
    ts = np.asarray(arrays["timestamp"], dtype=np.float64).reshape(-1)
    if not np.isfinite(ts).all():
        row = int(np.flatnonzero(~np.isfinite(ts))[0])
        raise DatasetFormatError(f"{where}: episode {episode.index}: row {row} has timestamp {ts[row]}; every row "
                                 "needs a finite timestamp (seconds from the episode's start).")
    if len(ts) > 2:
        spacing = float(np.median(np.diff(ts)))
        if not spacing > 0 or abs(spacing * fps - 1) > RATE_SLACK:
            rate = f" ({1 / spacing:.3f} fps)" if spacing > 0 else ""
            raise DatasetFormatError(
                f"{where}: episode {episode.index}: its timestamps are spaced {spacing:.6f} s{rate} but "
                f"meta/info.json says fps {fps}: one of them is wrong, and every delta_timestamps window would have "
                "the wrong span. Fix the fps in meta/info.json or the timestamps.")


def timestamp_gaps(episode, fps: float, timestamps: np.ndarray) -> tuple[float, int, str] | None:
    """The largest gap (s) between a row's camera query (`timestamp` + the camera's `from_timestamp`) and the
    nearest frame of the episode's own span of the file (frames at multiples of 1/fps), with its row and camera;
    None without cameras. LeRobot takes the nearest frame of the whole file, which past the span's ends belongs to
    another episode (or lies past the file's end, and fails); dl's nearest frame stays within the episode."""
    worst = None
    ts = np.asarray(timestamps, dtype=np.float64).reshape(-1)
    for key, span in episode.videos.items():
        first, last = frame_range(span, fps, episode.length)
        query = span.from_timestamp + ts
        frame = np.clip(np.rint(query * fps), first, last)
        gap = np.abs(query - frame / fps)
        row = int(gap.argmax())
        if worst is None or gap[row] > worst[0]:
            worst = (float(gap[row]), row, key)
    return worst


def frame_range(span, fps: float, length: int) -> tuple[int, int]:
    """First and last frame number (file timeline, frames at multiples of 1/fps) of a camera's episode span: from
    `from_timestamp`, one frame per row (LeRobot's writers encode one frame per row; a `to_timestamp` one frame
    short of it, as some writers leave it, is not taken to drop the last frame)."""
    first = int(round(span.from_timestamp * fps))
    return first, first + max(length, 1) - 1


def suggest_tolerance(gap: float) -> float:
    """A `tolerance_s` that serves a largest gap of `gap` s (LeRobot's test is gap < tolerance_s): the next 0.1 ms."""
    return (math.floor(gap * 1e4 + 1e-6) + 1) / 1e4


def check_tolerance(where: str, episode, fps: float, timestamps: np.ndarray, tolerance_s: float,
                    others: list[int] = ()) -> float:
    """Refuse an episode whose timestamps `tolerance_s` would not serve (`timestamp_gaps`); returns its largest gap.
    `others`: further episodes the tolerance would not serve (named in the message; this one has the largest gap).

    Raises:
        TimestampToleranceError: with the row, the gap, the shift of the timestamps from frame_index / fps when
            they are shifted, and the `--tolerance-s` that would serve the episode(s).
    """
    found = timestamp_gaps(episode, fps, timestamps)
    if found is None or found[0] < tolerance_s:
        return 0.0 if found is None else found[0]
    gap, row, key = found
    ts = np.asarray(timestamps, dtype=np.float64).reshape(-1)
    shift = float(np.median(ts - np.arange(len(ts)) / fps))
    shifted = (f" Its timestamps are shifted by {shift:+.6f} s ({shift * fps:+.2f} frames) from frame_index / fps."
               if abs(shift) * fps >= 0.5 else "")
    first, last = frame_range(episode.videos[key], fps, episode.length)
    beyond = not first <= round((episode.videos[key].from_timestamp + ts[row]) * fps) <= last
    past = (" That row's timestamp lies outside the episode's frames: LeRobot would take another episode's frame "
            "there (or fail past the file's end); dl takes the episode's nearest own frame." if beyond else "")
    also = (f" The same holds for {len(others)} more episode(s) ({format_indices(list(others))}); this gap is the "
            "largest." if others else "")
    them = "them" if others else "it"
    raise TimestampToleranceError(
        f"{where}: episode {episode.index}: row {row} (timestamp {ts[row]:.6f} s) is {gap:.6f} s from the nearest "
        f"frame of camera {key} in its span of {episode.videos[key].path}, more than tolerance_s={tolerance_s}."
        f"{past}{shifted}{also} --tolerance-s {suggest_tolerance(gap)} (tolerance_s={suggest_tolerance(gap)}) would "
        f"serve {them}, each row getting the frame nearest its timestamp as in LeRobot; or fix the timestamps, or "
        "leave the episode out.")


def check_rows(meta, episode, arrays: dict, tolerance_s: float | None) -> tuple[float, dict[str, int]]:
    """Every check of one episode's rows: structure (`check_episode_rows`), task indices (`check_indices`) and,
    unless `tolerance_s` is None, its timestamps against the tolerance (`check_tolerance`).

    Returns:
        (the largest gap between a row's camera query and its frame, in s; NaN/inf counts by float feature).

    Raises:
        DatasetFormatError, TimestampToleranceError: as those checks.
    """
    where = f"{meta.source.url}/{episode.data_path}"
    check_episode_rows(where, episode, meta.fps, arrays)
    check_indices(where, episode, arrays, meta.tasks, meta.subtasks)
    if tolerance_s is None:
        found = timestamp_gaps(episode, meta.fps, arrays["timestamp"])
        gap = 0.0 if found is None else found[0]
    else:
        gap = check_tolerance(where, episode, meta.fps, arrays["timestamp"], tolerance_s)
    return gap, nonfinite_counts(meta.features, arrays)


def check_indices(where: str, episode, arrays: dict, tasks: dict, subtasks: dict) -> None:
    """Refuse rows whose `task_index` (or `subtask_index`) is not in meta/tasks.parquet (meta/subtasks.parquet):
    LeRobot fails on them mid-epoch (`tasks.iloc`), and the sample would have no task.

    Raises:
        DatasetFormatError: naming the episode, the unknown indices and the known ones.
    """
    for key, table, rel in (("task_index", tasks, "meta/tasks.parquet"),
                            ("subtask_index", subtasks, "meta/subtasks.parquet")):
        if key not in arrays or (key == "subtask_index" and not subtasks):
            continue
        unknown = sorted(set(np.unique(np.asarray(arrays[key])).tolist()) - set(table))
        if unknown:
            raise DatasetFormatError(
                f"{where}: episode {episode.index} has {key} {format_indices(unknown)}, which {rel} does not list "
                f"(it has {format_indices(list(table)) or 'none'}). Restore {rel} from the dataset's origin, or leave "
                "the episode out.")


def nonfinite_counts(features: dict, arrays: dict) -> dict[str, int]:
    """`{key: values that are NaN or +-inf}` over the float features of `arrays` (only keys with some)."""
    out = {}
    for key, values in arrays.items():
        if features.get(key, {}).get("dtype") in NUMERIC_DTYPES and np.issubdtype(np.asarray(values).dtype,
                                                                                  np.floating):
            bad = int(values.size - np.count_nonzero(np.isfinite(values)))
            if bad:
                out[key] = bad
    return out


def report_nonfinite(where: str, counts: dict[str, int], episodes: list[int], strict: bool) -> None:
    """Warn about NaN/inf values (LeRobot serves them as stored), or refuse them with `strict`.

    Raises:
        DatasetFormatError: with `strict`, naming the features, the counts and the episodes.
    """
    if not counts:
        return
    what = ", ".join(f"{key}: {n}" for key, n in counts.items())
    text = f"{where}: NaN or inf values in episode(s) {format_indices(episodes)} ({what})"
    if strict:
        raise DatasetFormatError(f"{text}; refused (strict). Clean the data, leave these episodes out, or drop "
                                 "--strict to serve them as stored.")
    warn(f"{text}; dl serves them as stored, as LeRobot does (--strict / strict=True refuses them).")
