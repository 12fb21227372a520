"""dl.format.selection_checks: the whole-selection screen gives what `check_rows` one episode at a time gives (the
first wrong episode's error, the largest timestamp gap's error naming the others, one NaN/inf warning with the
counts), for any mix of wrong and right episodes, runs of any size and one or two cameras, on files whose
episodes start off the 1/fps grid (concatenated recordings whose durations are not whole frames)."""

import re
import types
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from dl.contracts.errors import DlError
from dl.format.checks import check_rows, report_nonfinite
from dl.format.frame_times import FrameTimes
from dl.format.metadata import EpisodeMeta, VideoSpan
from dl.format.selection_checks import check_selection
from dl.format.timestamp_checks import check_tolerance

FPS = 10
FEATURES = {"observation.state": {"dtype": "float32", "shape": [2]}, "timestamp": {"dtype": "float32", "shape": [1]}}
SHIFTS = (0.0, 0.02, 0.04, 0.07, 0.15)
"""Timestamp shifts in s (0.4, 0.7, 1.5 frames at 10 fps...), around the tolerances drawn."""
TAILS = (0.0, 0.0037, 0.021)
"""How far (s) a recording runs past its last frame: the next episode's frames start that much after the grid."""
FAULTS = ("none",) * 6 + ("shift",) * 3 + ("nan_state", "owner", "frame_index", "nan_timestamp", "rate", "task",
                                           "jitter")


def episode(index: int, length: int, start: float, cameras: int, speed: int = 1) -> EpisodeMeta:
    """An episode whose camera spans hold its rows at `speed` x FPS."""
    videos = {f"cam{c}": VideoSpan(f"videos/cam{c}.mp4", start, start + length / (FPS * speed)) for c in range(cameras)}
    return EpisodeMeta(index, length, 0, length, "data/file-000.parquet", videos, ("task",))


def rows(ep: EpisodeMeta, fault: str, shift: float) -> dict:
    n = ep.length
    out = {"episode_index": np.full(n, ep.index), "frame_index": np.arange(n), "timestamp": np.arange(n) / FPS,
           "task_index": np.zeros(n, dtype=np.int64), "observation.state": np.ones((n, 2), dtype=np.float32)}
    if fault == "owner":
        out["episode_index"][-1] += 1
    elif fault == "frame_index":
        out["frame_index"][-1] += 1
    elif fault == "nan_timestamp":
        out["timestamp"][-1] = np.nan
    elif fault == "rate" and n > 2:
        out["timestamp"] = np.arange(n) / (2 * FPS)
    elif fault == "jitter":  # one row late by 0.4 frames: two spacings off the rate, the median on it
        out["timestamp"][n // 2] += 0.4 / FPS
    elif fault == "task":
        out["task_index"][0] = 7
    elif fault == "shift":
        out["timestamp"] = out["timestamp"] + shift
    elif fault == "nan_state":
        out["observation.state"][0, 1] = np.inf
    return out


def reference(meta, episodes, arrays, tolerance_s, strict):
    """`check_selection` as one loop of `check_rows` (what the screen must equal)."""
    worst, over, counts, with_nonfinite = None, [], {}, []
    for ep, a in zip(episodes, arrays, strict=True):
        gap, nonfinite = check_rows(meta, ep, a, None)
        if gap >= tolerance_s:
            over.append(ep.index)
            if worst is None or gap > worst[0]:
                worst = (gap, ep, a["timestamp"])
        for key, n in nonfinite.items():
            counts[key] = counts.get(key, 0) + n
        if nonfinite:
            with_nonfinite.append(ep.index)
    if worst is not None:
        check_tolerance(f"{meta.source.url}/{worst[1].data_path}", meta, worst[1], worst[2], tolerance_s,
                        [e for e in over if e != worst[1].index])
    report_nonfinite(meta.source.url, counts, with_nonfinite, strict)


def outcome(check) -> tuple[str, list[str]]:
    """(the error raised, or "", the warnings issued)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            check()
            error = ""
        except DlError as exc:
            error = f"{type(exc).__name__}: {exc}"
    return error, [str(w.message) for w in caught]


@settings(max_examples=examples(300), deadline=None, derandomize=True, database=None)
@given(plan=st.lists(st.tuples(st.integers(1, 9), st.sampled_from(FAULTS), st.sampled_from(SHIFTS),
                               st.sampled_from(TAILS)), min_size=1, max_size=12),
       cameras=st.integers(0, 2), run=st.integers(1, 5), tolerance_s=st.sampled_from([1e-4, 0.03, 0.05, 0.12]),
       strict=st.booleans(), speed=st.sampled_from([1, 1, 2]))
def test_the_screen_equals_checking_each_episode(plan, cameras, run, tolerance_s, strict, speed):
    # speed 2: the video runs at twice info.json's fps, so timestamps at that rate ("rate") show a wrong fps; at
    # speed 1 the same timestamps drift from a video at info.json's fps
    meta = fake_meta(cameras)
    episodes, arrays, start, frames = [], [], 0.0, []
    for i, (length, fault, shift, tail) in enumerate(plan):
        episodes.append(episode(i, length, start, cameras, speed))
        arrays.append(rows(episodes[-1], fault, shift))
        frames.append(start + np.arange(length) / (FPS * speed))
        start += length / (FPS * speed) + tail
    for c in range(cameras):
        meta.frame_times.times[f"videos/cam{c}.mp4"] = np.concatenate(frames)
    runs = [(a, min(a + run, len(episodes)), {k: np.concatenate([x[k] for x in arrays[a:a + run]])
                                                 for k in arrays[0]}) for a in range(0, len(episodes), run)]
    expected = outcome(lambda: reference(meta, episodes, arrays, tolerance_s, strict))
    got = outcome(lambda: check_selection(meta, episodes, arrays.__getitem__, runs, tolerance_s, strict))
    assert got == expected


def fake_meta(cameras: int) -> types.SimpleNamespace:
    """What the checks read of a `DatasetMeta`; the files' frame times are set by the test."""
    return types.SimpleNamespace(source=types.SimpleNamespace(url="file:///ds"), fps=FPS, features=FEATURES,
                                 tasks={0: "task"}, subtasks={}, video_keys=[f"cam{c}" for c in range(cameras)],
                                 frame_times=FrameTimes(), files={})


@pytest.mark.parametrize(("speed", "cameras", "refused"), [(2, 1, True), (1, 0, True), (1, 1, False)])
def test_rows_off_the_rate_are_a_wrong_fps_unless_the_video_is_at_it(speed, cameras, refused):
    # rows at 2 x FPS: with a video at 2 x FPS too (or no video), info.json's fps is wrong; with one frame per row
    # at FPS, the rows drift from the video, which the tolerance check says (with the row pairing as the fix)
    meta = fake_meta(cameras)
    meta.frame_times.times["videos/cam0.mp4"] = np.arange(20) / (FPS * speed)
    ep = episode(0, 20, 0.0, cameras, speed)
    arrays = rows(ep, "rate", 0)
    got = outcome(lambda: check_rows(meta, ep, arrays, None))[0]
    wrong_fps = ("DatasetFormatError: file:///ds/data/file-000.parquet: episode 0: its timestamps are spaced "
                 "0.050000 s (20.000 fps) but meta/info.json says fps 10: one of them is wrong")
    assert got.startswith(wrong_fps) if refused else got == ""
    if not refused:
        message = outcome(lambda: check_rows(meta, ep, arrays, 1e-4))[0]
        assert "drift from them to -0.950000 s (-9.50 frames)" in message and "--frame-pairing row" in message


def test_a_wrong_episode_is_named_with_its_row():
    meta = fake_meta(1)
    meta.frame_times.times["videos/cam0.mp4"] = np.arange(10) / FPS
    episodes = [episode(0, 5, 0.0, 1), episode(1, 5, 0.5, 1)]
    arrays = [rows(episodes[0], "none", 0), rows(episodes[1], "frame_index", 0)]
    runs = [(0, 2, {k: np.concatenate([a[k] for a in arrays]) for k in arrays[0]})]
    with pytest.raises(DlError, match=re.escape("episode 1 has frame_index 5 at row 4")):
        check_selection(meta, episodes, arrays.__getitem__, runs, 1e-4, False)
