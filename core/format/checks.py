"""Checks of an episode's rows, run where a loader reads them and by `dl validate`, so that wrong data is refused
instead of served.

The rule: where values would be wrong (a sample would carry another frame, another episode's rows, a window of the
wrong span) or LeRobot would crash, refuse with an error naming the file, the episode and what to do; where LeRobot
serves the data and the values are what is stored, warn once (`dl.contracts.errors.warn`), naming what was found.

Timestamps are checked against the files' real frame times (`dl.format.timestamp_checks`): a dataset the tolerance
would not serve is refused before a run, with the fix.
"""

import numpy as np

from ..contracts.errors import DatasetFormatError, format_indices, warn
from .features import NUMERIC_DTYPES
from .timestamp_checks import RATE_SLACK, check_pairing, check_tolerance, frames_at_rate, timestamp_gaps


def check_episode_rows(where: str, meta, episode, arrays: dict) -> None:
    """Check one episode's rows: every `episode_index` is the episode's, `frame_index` counts 0, 1, ...,
    length - 1 (LeRobot's writers number them so), and the timestamps are finite and spaced at about 1/fps
    (`RATE_SLACK`): a wrong `fps` in info.json would give every `delta_timestamps` window the wrong span. Timestamps
    off that rate pass here when the files say info.json's fps is right (`frames_at_rate`: every camera's span holds
    one frame per row, at 1/fps): they drift from the video, which the tolerance check says (`check_tolerance`) and
    `frame_pairing="row"` serves.

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
    fps = meta.fps
    if len(ts) > 2:
        spacing = float(np.median(np.diff(ts)))
        if not spacing > 0 or (abs(spacing * fps - 1) > RATE_SLACK and not frames_at_rate(meta, episode)):
            rate = f" ({1 / spacing:.3f} fps)" if spacing > 0 else ""
            raise DatasetFormatError(
                f"{where}: episode {episode.index}: its timestamps are spaced {spacing:.6f} s{rate} but "
                f"meta/info.json says fps {fps}: one of them is wrong, and every delta_timestamps window would have "
                "the wrong span. Fix the fps in meta/info.json or the timestamps.")


def check_rows(meta, episode, arrays: dict, tolerance_s: float | None,
               frame_pairing: str = "timestamp") -> tuple[float, dict[str, int]]:
    """Every check of one episode's rows: structure (`check_episode_rows`), task indices (`check_indices`) and the
    frames its rows get: with `frame_pairing="timestamp"`, unless `tolerance_s` is None, its timestamps against the
    tolerance (`check_tolerance`); with "row", one frame per row in every camera's span (`check_pairing`).

    Returns:
        (the largest gap between a row's camera query and its frame, in s (0 with row pairing); NaN/inf counts by
        float feature).

    Raises:
        DatasetFormatError, TimestampToleranceError: as those checks.
    """
    where = f"{meta.source.url}/{episode.data_path}"
    check_episode_rows(where, meta, episode, arrays)
    check_indices(where, episode, arrays, meta.tasks, meta.subtasks)
    if frame_pairing == "row":
        check_pairing(where, meta, episode)
        gap = 0.0
    elif tolerance_s is None:
        found = timestamp_gaps(meta, episode, arrays["timestamp"])
        gap = 0.0 if found is None else found[0]
    else:
        gap = check_tolerance(where, meta, episode, arrays["timestamp"], tolerance_s)
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
