"""Checks of meta/episodes against itself and info.json, from metadata alone (no data or video read): each episode's
global index range against its length, each camera's span in its video file against the episode's length, spans
that overlap another episode's in the same file, and info.json's totals.

An episode whose metadata is wrong would be served another moment's frames (a shifted span) or another episode's
rows; it is refused when a selection includes it (`DatasetMeta.select`), so the other episodes stay usable.
"""

import numpy as np

from ..contracts.errors import DatasetFormatError, format_indices, warn

SPAN_SLACK_FRAMES = 1.0
"""How far (in frames) a camera's span may differ from the episode's length: LeRobot's writers take the span from
the encoded video's duration, which can round to a neighbouring frame; a shifted `to_timestamp` is off by more."""


def episode_problems(fps: float, columns) -> dict[int, str]:
    """`{episode index: what is wrong}` for every episode whose metadata cannot be served as is:
    `dataset_to_index - dataset_from_index` other than `length`; a camera span (`from_timestamp`,
    `to_timestamp`) that is not finite, starts before 0, or lasts more than `SPAN_SLACK_FRAMES` more or less
    than `length / fps`; a span moved within its file (it neither starts where the file's previous episode ends
    nor ends where the next one starts); a span overlapping another episode's span in the same video file (by
    more than half a frame: each file holds its episodes one after another). Vectorized over the episodes
    (`columns`: a `dl.format.episodes.EpisodeColumns`); the first problem found is an episode's, in that order
    (cameras in info.json order).
    """
    problems: dict[int, str] = {}
    index, length = columns.index, columns.length
    span_ok = columns.dataset_to_index - columns.dataset_from_index == length  # this and every earlier camera fine
    for k in np.flatnonzero(~span_ok).tolist():
        problems[int(index[k])] = (f"length {int(length[k])} but global indices [{int(columns.dataset_from_index[k])}, "
                                   f"{int(columns.dataset_to_index[k])}) in meta/episodes")
    spans = []  # (camera key, positions whose span of that camera is checked against the file's other episodes)
    for key in columns.video_keys:
        start, end = columns.from_timestamp[key], columns.to_timestamp[key]
        paths = columns.video_paths[key]
        with np.errstate(invalid="ignore"):
            valid = np.isfinite(start) & np.isfinite(end) & (start >= 0) & (end >= start)
            frames = (end - start) * fps
            fits = valid & (np.abs(frames - length) <= SPAN_SLACK_FRAMES + 1e-6)
        for k in np.flatnonzero(span_ok & ~valid).tolist():
            problems[int(index[k])] = (f"camera {key} spans [{start[k]}, {end[k]}) s of "
                                       f"{paths[columns.video_file[key][k]]}, which is not a time span")
        for k in np.flatnonzero(span_ok & valid & ~fits).tolist():
            problems[int(index[k])] = (f"camera {key} spans {end[k] - start[k]:.3f} s of "
                                       f"{paths[columns.video_file[key][k]]} ({frames[k]:.1f} frames at {fps} fps: "
                                       f"from_timestamp {start[k]:.3f}, to_timestamp {end[k]:.3f}), but the episode "
                                       f"has {int(length[k])} frames")
        span_ok = span_ok & fits
        spans.append((key, np.flatnonzero(span_ok)))
    half = 0.5 / fps
    for key, at in spans:  # positions ascend with the episode index: the order LeRobot's writers append to a file
        start, end = columns.from_timestamp[key][at], columns.to_timestamp[key][at]
        file = columns.video_file[key][at]
        paths = columns.video_paths[key]
        order = np.argsort(file, kind="stable")
        at, start, end, file = at[order], start[order], end[order], file[order]
        first = np.r_[True, file[1:] != file[:-1]]  # a file's first episode starts at 0
        last = np.r_[file[1:] != file[:-1], True]
        before = np.where(first, 0.0, np.r_[0.0, end[:-1]])
        follows = np.abs(start - before) <= half
        meets = last | (np.abs(end - np.r_[start[1:], 0.0]) <= half)
        moved = ~follows & ~meets  # out of step with both neighbours: this span was moved
        for i in np.flatnonzero(moved).tolist():
            after = f"the previous episode's end ({before[i]:.3f} s)" if not first[i] else "the file's start (0 s)"
            problems.setdefault(int(index[at[i]]), (
                f"camera {key}'s span [{start[i]:.3f}, {end[i]:.3f}) s of {paths[file[i]]} neither starts at {after} "
                "nor ends where the next episode's starts: it was moved (each episode of a file starts where the one "
                "before ends)"))
        by_start = np.lexsort((index[at], start, file))  # an overlap no moved span explains: both are suspect
        a, b = by_start[:-1], by_start[1:]
        overlap = (file[a] == file[b]) & (start[b] < end[a] - half) & ~moved[a] & ~moved[b]
        for i, j in zip(a[overlap].tolist(), b[overlap].tolist(), strict=True):
            for this, other in ((i, j), (j, i)):
                problems.setdefault(int(index[at[this]]), (
                    f"camera {key}'s span overlaps episode {int(index[at[other]])}'s [{start[other]:.3f}, "
                    f"{end[other]:.3f}) s in {paths[file[i]]}; each episode has its own part of the file"))
    return dict(sorted(problems.items()))


def check_rate(url: str, fps: float, columns) -> None:
    """Refuse an info.json `fps` that the camera spans of meta/episodes contradict: when the episodes' spans hold
    their rows at another rate (by more than `dl.format.timestamp_checks.RATE_SLACK`, as the median over episodes and
    cameras), every timestamp and `delta_timestamps` window would be read at the wrong rate. Vectorized over the
    episodes (`columns`: a `dl.format.episodes.EpisodeColumns`).

    Raises:
        DatasetFormatError: with both rates.
    """
    from .timestamp_checks import RATE_SLACK

    ratios = []
    for key in columns.video_keys:
        duration = columns.to_timestamp[key] - columns.from_timestamp[key]
        with np.errstate(invalid="ignore"):
            usable = (duration > 0) & (columns.length > 1)
        ratios.append(columns.length[usable] / (duration[usable] * fps))
    ratios = np.sort(np.concatenate(ratios)) if ratios else np.zeros(0)
    if not len(ratios):
        return
    ratio = float(ratios[len(ratios) // 2])
    if abs(ratio - 1) > RATE_SLACK:
        raise DatasetFormatError(
            f"{url}/meta/info.json says fps {fps}, but the episodes' camera spans in meta/episodes hold one frame per "
            f"row at {fps * ratio:.3f} fps: one of them is wrong, and every timestamp and delta_timestamps window "
            "would be read at the wrong rate. Fix the fps in meta/info.json (or meta/episodes).")


def describe_problems(problems: dict[int, str], shown: int = 3) -> str:
    """The first `shown` problems as one sentence, with a count of the rest."""
    parts = [f"episode {e}: {why}" for e, why in list(problems.items())[:shown]]
    more = f" (and {len(problems) - shown} more episode(s))" if len(problems) > shown else ""
    return "; ".join(parts) + more


def check_totals(url: str, info: dict, columns) -> None:
    """Warn (once) where info.json's `total_episodes` / `total_frames` disagree with meta/episodes (a partial
    upload, or an edited dataset): dl serves the episodes meta/episodes lists, and a selection that needs one it
    lacks is refused (`DatasetMeta.select`). `columns`: a `dl.format.episodes.EpisodeColumns`."""
    total = info.get("total_episodes")
    frames = info.get("total_frames")
    read = int(columns.length.sum())
    listed = columns.index.tolist() if isinstance(total, int) and total != len(columns) else []
    if isinstance(total, int) and total != len(columns):
        absent = sorted(set(range(total)) - set(listed))
        lacks = f", lacks episode(s) {format_indices(absent)}" if absent else ""
        warn(f"{url}/meta/info.json: counts total_episodes={total} (total_frames={frames}), but meta/episodes has "
             f"{len(columns)} episode(s), {read} frames{lacks} (a partial upload?); dl serves the episodes "
             f"meta/episodes has: --episodes {format_indices(listed)}.")
    elif isinstance(frames, int) and frames != read:
        warn(f"{url}/meta/info.json: says total_frames={frames}, but the episodes in meta/episodes hold {read} "
             "frames; dl serves the episodes' frames.")
