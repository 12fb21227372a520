"""`dl.format.checks.check_rows` over a whole selection at the cost of a few numpy passes, for a loader that holds
every row (`map`): start-up must not grow with per-episode Python work (issue: a million episodes).

Each run of rows (a record batch of many episodes) is screened at once: rows that break an episode's structure
(`episode_index`, `frame_index`, finite and evenly spaced timestamps), unknown task indices, each episode's largest
gap between a camera query and its nearest own frame (from the files' frame times), and NaN/inf counts. Only the
episodes the screen flags are checked again one by one with `dl.format.checks`, which raises the error, so the
messages are those of the per-episode checks.
"""

from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from . import kept_screens
from .checks import check_rows, report_nonfinite
from .episodes import episode_lengths
from .features import NUMERIC_DTYPES
from .frame_times import half_spacing, load_selection, nearest
from .load_times import timed
from .timestamp_checks import RATE_SLACK, check_pairing, check_tolerance

Run = tuple[int, int, dict]
"""`(first episode, end episode, {key: array [rows, *shape]})`: the rows of selection positions [first, end), in
order (`plugins.map.arrow_store.ArrowEpisodeStore.runs`)."""


def check_selection(meta, episodes, arrays_of: Callable[[int], dict], runs: Iterable[Run], tolerance_s: float,
                    strict: bool, frame_pairing: str = "timestamp", kept: Path | None = None) -> None:
    """`check_rows` over a whole selection (`episodes`, a sequence of `EpisodeMeta`; `arrays_of(i)` the i-th one's
    arrays; `runs` the same rows many episodes at a time), as a loader holding every row runs it up front: the first
    wrong episode is refused, timestamps the tolerance would not serve are refused naming the largest gap over the
    selection (with `frame_pairing="row"`: an episode whose spans do not hold one frame per row), and NaN/inf values
    are counted over the selection into one warning (refused with `strict`). The files' frame times are read here,
    once (`DatasetMeta.frame_times`). `kept`: where the screen's results for these rows are kept
    (`dl.format.kept_screens.screen_path`): read from there when present, else computed and kept there.

    Raises:
        DatasetFormatError, TimestampToleranceError: as `check_rows` and `report_nonfinite`.
    """
    load_selection(meta, episodes)
    with timed(meta, "checks"):
        _check(meta, episodes, arrays_of, runs, tolerance_s, strict, frame_pairing, kept)


def _check(meta, episodes, arrays_of, runs, tolerance_s, strict, frame_pairing, kept) -> None:
    """`check_selection` once the frame times are read."""
    count = len(episodes)
    screened = None if kept is None else kept_screens.load(kept, count)
    if screened is None:
        screened = _screen_all(meta, episodes, runs)
        if kept is not None:
            kept_screens.keep(kept, screened)
    suspect, gaps, nonfinite = screened
    for i in np.flatnonzero(suspect).tolist():
        check_rows(meta, episodes[i], arrays_of(i), None)  # raises for a wrong episode (the screen only suspects)
    if frame_pairing == "row":
        for episode in episodes:
            check_pairing(f"{meta.source.url}/{episode.data_path}", meta, episode)
    else:
        over = np.flatnonzero(gaps >= tolerance_s)
        if len(over):
            worst = int(over[np.argmax(gaps[over])])
            episode = episodes[worst]
            others = [int(e) for e in _indices(episodes)[over] if e != episode.index]
            check_tolerance(f"{meta.source.url}/{episode.data_path}", meta, episode,
                            np.asarray(arrays_of(worst)["timestamp"]), tolerance_s, others)
    counts = {key: int(n.sum()) for key, n in nonfinite.items() if n.any()}
    with_nonfinite = np.zeros(count, dtype=bool)
    for n in nonfinite.values():
        with_nonfinite |= n > 0
    report_nonfinite(meta.source.url, counts, _indices(episodes)[with_nonfinite].tolist(), strict)


def _screen_all(meta, episodes, runs: Iterable[Run]) -> kept_screens.Screened:
    """`_screen` over every run of the selection, gathered per episode."""
    count = len(episodes)
    suspect = np.zeros(count, dtype=bool)
    gaps = np.zeros(count, dtype=np.float64)
    nonfinite: dict[str, np.ndarray] = {}
    for first, end, columns in runs:
        screen = _screen(meta, episodes, first, end, columns)
        suspect[first:end], gaps[first:end] = screen[0], screen[1]
        for key, counts in screen[2].items():
            nonfinite.setdefault(key, np.zeros(count, dtype=np.int64))[first:end] = counts
    return suspect, gaps, nonfinite


def _indices(episodes) -> np.ndarray:
    index = getattr(episodes, "index", None)
    return index if isinstance(index, np.ndarray) else np.array([ep.index for ep in episodes], dtype=np.int64)


def _screen(meta, episodes, first: int, end: int, columns: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """For the episodes at [first, end) of the selection: (bool [E] suspected wrong by `check_episode_rows` or
    `check_indices`, float64 [E] largest camera gap in s as `timestamp_gaps` measures it, {float key: int64 [E]
    NaN/inf values})."""
    part = episodes[first:end]
    lengths = episode_lengths(part)
    index = _indices(part)
    n = len(lengths)
    seg = np.repeat(np.arange(n), lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    local = np.arange(len(seg)) - starts[seg]
    ts = np.asarray(columns["timestamp"], dtype=np.float64).reshape(-1)
    bad = np.asarray(columns["episode_index"]).reshape(-1) != index[seg]
    bad |= np.asarray(columns["frame_index"]).reshape(-1) != local
    bad |= ~np.isfinite(ts)
    for key, table in (("task_index", meta.tasks), ("subtask_index", meta.subtasks)):
        if key in columns and (key == "task_index" or table):
            bad |= ~np.isin(np.asarray(columns[key]).reshape(-1), np.fromiter(table, dtype=np.int64, count=len(table)))
    suspect = np.bincount(seg, weights=bad, minlength=n) > 0
    gaps, at_rate = _gaps(meta, part, ts, seg, lengths)
    unordered, off_rate = _off_rate(ts, seg, lengths, meta.fps)
    suspect |= unordered | (off_rate & ~at_rate)
    return suspect, gaps, _nonfinite(meta.features, columns, seg, n)


def _off_rate(ts: np.ndarray, seg: np.ndarray, lengths: np.ndarray, fps: float) -> tuple[np.ndarray, np.ndarray]:
    """(bool [E] episodes of more than 2 rows whose median timestamp spacing is not > 0, bool [E] those whose median
    spacing is not 1/fps within `RATE_SLACK`): `check_episode_rows`'s tests, with each episode's median of its
    row-to-row differences."""
    same = seg[1:] == seg[:-1]
    diffs, owner = np.diff(ts)[same], seg[1:][same]
    order = np.lexsort((diffs, owner))
    diffs = diffs[order]
    counts = np.maximum(lengths - 1, 0)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    checked = np.flatnonzero(lengths > 2)
    lo = diffs[start[checked] + (counts[checked] - 1) // 2]
    hi = diffs[start[checked] + counts[checked] // 2]
    spacing = (lo + hi) / 2
    unordered, off = np.zeros(len(lengths), dtype=bool), np.zeros(len(lengths), dtype=bool)
    with np.errstate(invalid="ignore"):
        unordered[checked] = ~(spacing > 0)
        off[checked] = ~(spacing > 0) | (np.abs(spacing * fps - 1) > RATE_SLACK)
    return unordered, off


def _gaps(meta, part, ts: np.ndarray, seg: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(float64 [E]: each episode's largest gap between a row's camera query and the nearest frame of its own span
    of the file, from the file's frame times (`dl.format.timestamp_checks.timestamp_gaps`, every camera at once,
    one pass per video file), 0 for a camera whose file has no index; bool [E]: whether the files show info.json's
    fps right for the episode (`dl.format.timestamp_checks.frames_at_rate`))."""
    out = np.zeros(len(lengths), dtype=np.float64)
    at_rate = np.full(len(lengths), bool(meta.video_keys))
    columns, positions = getattr(part, "columns", None), getattr(part, "positions", None)
    for key in meta.video_keys:
        if columns is not None:
            from_ts = columns.from_timestamp[key][positions]
            to_ts = columns.to_timestamp[key][positions]
            file_of = columns.video_file[key][positions]
            paths = columns.video_paths[key]
        else:
            spans = [ep.videos[key] for ep in part]
            from_ts = np.array([s.from_timestamp for s in spans], dtype=np.float64)
            to_ts = np.array([s.to_timestamp for s in spans], dtype=np.float64)
            paths = sorted({s.path for s in spans})
            file_of = np.array([paths.index(s.path) for s in spans], dtype=np.int64)
        used = np.unique(file_of)
        query = from_ts[seg] + ts
        row_order, row_at = _groups(file_of[seg], used)
        ep_order, ep_at = _groups(file_of, used)
        first, last = np.zeros(len(lengths), dtype=np.int64), np.zeros(len(lengths), dtype=np.int64)
        camera_at_rate = np.zeros(len(lengths), dtype=bool)
        for g, f in enumerate(used.tolist()):
            times = meta.frame_times.times.get(paths[f])
            if times is None:
                continue
            eps = ep_order[ep_at[g]:ep_at[g + 1]]
            half = half_spacing(times)
            first[eps], last[eps], empty = _span_bounds(times, half, from_ts[eps], to_ts[eps], lengths[eps])
            camera_at_rate[eps] = (~empty & (last[eps] - first[eps] + 1 == lengths[eps])
                                   & (abs(2 * half * meta.fps - 1) <= RATE_SLACK))
            rows = row_order[row_at[g]:row_at[g + 1]]
            if empty.any():  # no frame in the span: the stream checks say so
                rows = rows[~np.isin(seg[rows], eps[empty])]
            if not len(rows):
                continue
            owner = seg[rows]  # ascending: an episode's rows are consecutive and, per camera, in one file
            with np.errstate(invalid="ignore"):  # a NaN timestamp: its episode is refused by the structure check
                _, gap = nearest(times, first[owner], last[owner], query[rows])
            starts = np.flatnonzero(np.diff(owner, prepend=-1))
            out[owner[starts]] = np.maximum(out[owner[starts]], np.maximum.reduceat(gap, starts))
        at_rate &= camera_at_rate
    return out, at_rate


def _groups(file_of: np.ndarray, used: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions ordered by file, int64 [n]; where each of `used` (ascending file numbers) starts in that order,
    int64 [len(used) + 1])."""
    order = np.argsort(file_of, kind="stable")
    return order, np.append(np.searchsorted(file_of[order], used), len(order))


def _span_bounds(times: np.ndarray, half: float, from_ts: np.ndarray, to_ts: np.ndarray,
                 lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inclusive first and last frame positions of many episodes' spans of one file (`span_frames`, `span_bounds`,
    vectorized; `half`: `half_spacing(times)`): int64 [E] each, and bool [E] the spans that show no frame."""
    first = np.searchsorted(times, from_ts - half)
    end = np.searchsorted(times, to_ts - half)
    end = np.where((end - first == lengths - 1) & (end < len(times)), end + 1, np.maximum(end, first))
    last = np.minimum(np.maximum(end - 1, first), max(len(times) - 1, 0))
    return np.minimum(first, last), last, end == first


def _nonfinite(features: dict, columns: dict, seg: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """`{float feature: int64 [E] NaN/inf values per episode}` (`dl.format.checks.nonfinite_counts`), keys with some."""
    out = {}
    for key, values in columns.items():
        if features.get(key, {}).get("dtype") in NUMERIC_DTYPES and np.issubdtype(np.asarray(values).dtype,
                                                                                  np.floating):
            finite = np.isfinite(np.asarray(values).reshape(len(seg), -1))
            if not finite.all():
                per_row = finite.shape[1] - np.count_nonzero(finite, axis=1)
                out[key] = np.bincount(seg, weights=per_row, minlength=n).astype(np.int64)
    return out
