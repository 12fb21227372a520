"""Checks of meta/episodes against itself and info.json, from metadata alone (no data or video read): each episode's
global index range against its length, each camera's span in its video file against the episode's length, spans
that overlap another episode's in the same file, and info.json's totals.

An episode whose metadata is wrong would be served another moment's frames (a shifted span) or another episode's
rows; it is refused when a selection includes it (`DatasetMeta.select`), so the other episodes stay usable.
"""

import math

from ..contracts.errors import DatasetFormatError, format_indices, warn

SPAN_SLACK_FRAMES = 1.0
"""How far (in frames) a camera's span may differ from the episode's length: LeRobot's writers take the span from
the encoded video's duration, which can round to a neighbouring frame; a shifted `to_timestamp` is off by more."""


def episode_problems(fps: float, episodes: dict) -> dict[int, str]:
    """`{episode index: what is wrong}` for every episode whose metadata cannot be served as is:
    `dataset_to_index - dataset_from_index` other than `length`; a camera span (`from_timestamp`,
    `to_timestamp`) that is not finite, starts before 0, or lasts more than `SPAN_SLACK_FRAMES` more or less
    than `length / fps`; a span overlapping another episode's span in the same video file (by more than half a
    frame: each file holds its episodes one after another)."""
    problems: dict[int, str] = {}
    by_file: dict[str, list[tuple[float, float, int, str]]] = {}
    for ep in episodes.values():
        if ep.dataset_to_index - ep.dataset_from_index != ep.length:
            problems[ep.index] = (f"length {ep.length} but global indices [{ep.dataset_from_index}, "
                                  f"{ep.dataset_to_index}) in meta/episodes")
            continue
        for key, span in ep.videos.items():
            start, end = span.from_timestamp, span.to_timestamp
            if not (math.isfinite(start) and math.isfinite(end)) or start < 0 or end < start:
                problems[ep.index] = f"camera {key} spans [{start}, {end}) s of {span.path}, which is not a time span"
                break
            frames = (end - start) * fps
            if abs(frames - ep.length) > SPAN_SLACK_FRAMES + 1e-6:
                problems[ep.index] = (f"camera {key} spans {end - start:.3f} s of {span.path} ({frames:.1f} frames "
                                      f"at {fps} fps: from_timestamp {start:.3f}, to_timestamp {end:.3f}), but the "
                                      f"episode has {ep.length} frames")
                break
            by_file.setdefault(span.path, []).append((start, end, ep.index, key))
    half = 0.5 / fps
    for path, spans in by_file.items():
        spans.sort(key=lambda span: span[2])  # the order LeRobot's writers append episodes to a file
        moved = set()
        for i, (start, end, e, key) in enumerate(spans):
            before = spans[i - 1][1] if i else 0.0  # a file's first episode starts at 0
            follows = abs(start - before) <= half
            meets = i == len(spans) - 1 or abs(end - spans[i + 1][0]) <= half
            if not follows and not meets:  # out of step with both neighbours: this span was moved
                moved.add(e)
                after = f"the previous episode's end ({before:.3f} s)" if i else "the file's start (0 s)"
                problems.setdefault(e, f"camera {key}'s span [{start:.3f}, {end:.3f}) s of {path} neither starts at "
                                       f"{after} nor ends where the next episode's starts: it was moved (each "
                                       "episode of a file starts where the one before ends)")
        by_start = sorted(spans)
        for (start, end, a, _), (start2, end2, b, key) in zip(by_start, by_start[1:], strict=False):
            if start2 < end - half and not {a, b} & moved:  # an overlap no moved span explains: both are suspect
                for this, other, lo, hi in ((a, b, start2, end2), (b, a, start, end)):
                    problems.setdefault(this, f"camera {key}'s span overlaps episode {other}'s [{lo:.3f}, {hi:.3f}) s "
                                              f"in {path}; each episode has its own part of the file")
    return dict(sorted(problems.items()))


def check_rate(url: str, fps: float, episodes: dict) -> None:
    """Refuse an info.json `fps` that the camera spans of meta/episodes contradict: when the episodes' spans hold
    their rows at another rate (by more than `dl.format.checks.RATE_SLACK`, as the median over episodes), every
    timestamp and `delta_timestamps` window would be read at the wrong rate.

    Raises:
        DatasetFormatError: with both rates.
    """
    from .checks import RATE_SLACK

    ratios = [ep.length / ((span.to_timestamp - span.from_timestamp) * fps) for ep in episodes.values()
              for span in ep.videos.values() if span.to_timestamp > span.from_timestamp and ep.length > 1]
    if not ratios:
        return
    ratio = sorted(ratios)[len(ratios) // 2]
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


def check_totals(url: str, info: dict, episodes: dict) -> None:
    """Warn (once) where info.json's `total_episodes` / `total_frames` disagree with meta/episodes (a partial
    upload, or an edited dataset): dl serves the episodes meta/episodes lists, and a selection that needs one it
    lacks is refused (`DatasetMeta.select`)."""
    total = info.get("total_episodes")
    frames = info.get("total_frames")
    read = sum(ep.length for ep in episodes.values())
    if isinstance(total, int) and total != len(episodes):
        absent = sorted(set(range(total)) - set(episodes))
        lacks = f", lacks episode(s) {format_indices(absent)}" if absent else ""
        warn(f"{url}/meta/info.json: counts total_episodes={total} (total_frames={frames}), but meta/episodes has "
             f"{len(episodes)} episode(s), {read} frames{lacks} (a partial upload?); dl serves the episodes "
             f"meta/episodes has: --episodes {format_indices(list(episodes))}.")
    elif isinstance(frames, int) and frames != read:
        warn(f"{url}/meta/info.json: says total_frames={frames}, but the episodes in meta/episodes hold {read} "
             "frames; dl serves the episodes' frames.")
