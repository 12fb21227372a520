"""Frame times from the files (issue 50): datasets whose videos hold real recordings' frame times (concatenated
episodes off the 1/fps grid, 29.97 fps, a variable frame rate, an edit list, B-frames, drifting wall-clock
timestamps) are served with every row's own frame where LeRobot's pairing serves it, refused in one line naming the
file, episode and fix where it does not, and `dl validate` finds exactly what the loaders refuse.

Every row's frame was recorded with it (its index code is the row's index), so the truth is the row's own frame;
whether a case's frames really lie off the grid is read from the file by ffprobe, not from the generator."""

import shutil
import subprocess
import types
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import dl
from dl.contracts.errors import DatasetFormatError, TimestampToleranceError
from dl.format.frame_times import FrameTimes
from dl.format.metadata import EpisodeMeta, VideoSpan
from dl.format.timestamp_checks import RATE_SLACK, check_pairing
from dl.format.validation import validate
from dl.host.assembly import build_decoder, open_dataset
from dl.testing.synthetic import camera_key, read_frame_code

CAM = camera_key(0)
CASE = {"episodes": 4, "frames_per_episode": (20, 30), "cameras": 1, "width": 64, "height": 64, "codec": "h264",
        "episodes_per_file": 2, "gop": 4}
SERVED = {
    "concatenated": {"concatenated": True, "recording_tail_s": 0.0037, "movie_timescale": 15360},
    "vfr": {"vfr_jitter": 0.3},
    "edit_list": {"edit_list_frames": 3},
    "bframes": {"gop": 30},
}
"""Cases LeRobot's pairing serves at its default tolerance_s (each row's timestamp is its frame's time)."""


def frame_times(path) -> np.ndarray:
    """The presentation times (s) of the frames FFmpeg shows from `path` (its packets, read by ffprobe)."""
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                          "packet=pts_time", "-of", "csv=p=0", str(path)], capture_output=True, text=True, check=True)
    times = np.sort([float(x) for x in out.stdout.split() if x.strip()])
    return times[times >= 0]


def first_file(root):
    return root / "videos" / CAM / "chunk-000" / "file-000.mp4"


def own_frames(samples, windows=False):
    """(served, wrong): every sample's camera frames against its rows' own frames."""
    wrong = []
    for s in samples:
        frames = s[CAM] if windows else s[CAM][None]
        rows = (int(s["index"]) + np.array([-2, 0, 1])) if windows else [int(s["index"])]
        ep_first = int(s["index"]) - int(s["frame_index"])
        for frame, row, pad in zip(frames, rows, s.get(f"{CAM}_is_pad", [False] * len(rows)), strict=True):
            if not pad and read_frame_code(frame)[0] != row:
                wrong.append((int(s["index"]), row, read_frame_code(frame)[0]))
            if pad and not ep_first <= read_frame_code(frame)[0] < ep_first + 60:
                wrong.append((int(s["index"]), row, read_frame_code(frame)[0]))
    return wrong


@pytest.mark.parametrize("case", sorted(SERVED))
def test_real_frame_times_are_served_with_each_rows_own_frame(dataset_factory, case):
    root = dataset_factory(**{**CASE, **SERVED[case]})
    times = frame_times(first_file(root))
    if case in ("concatenated", "vfr"):  # the case proves something only off the grid of the file's timeline
        assert np.abs(times * 30 - np.rint(times * 30)).max() > 0.05
    for loader in ("map", "pool"):
        ds = dl.make_dataset(str(root), loader=loader, image_dtype="uint8")
        samples = [ds[i] for i in range(len(ds))] if loader == "map" else list(ds)
        assert len(samples) == sum(open_dataset(str(root)).episodes[e].length for e in range(4))
        assert own_frames(samples) == [], (case, loader)
    assert validate(open_dataset(str(root)), build_decoder("cpu"), decode="ends").errors == []


def test_windows_on_concatenated_episodes(dataset_factory):
    root = dataset_factory(**{**CASE, **SERVED["concatenated"]})
    ds = dl.make_dataset(str(root), image_dtype="uint8", delta_timestamps={CAM: [-2 / 30, 0.0, 1 / 30]})
    assert own_frames([ds[i] for i in range(len(ds))], windows=True) == []


def test_a_29_97_fps_camera_is_refused_with_a_tolerance_under_half_a_frame(dataset_factory):
    root = dataset_factory(**{**CASE, "video_rate": "30000/1001"})
    assert np.diff(frame_times(first_file(root))).mean() == pytest.approx(1001 / 30000, abs=1e-6)
    with pytest.raises(TimestampToleranceError) as err:
        dl.make_dataset(str(root))
    message = str(err.value)
    assert "\n" not in message and "data/chunk-000/file-00" in message and "episode " in message
    tolerance = float(message.split("--tolerance-s ")[1].split(" ")[0])
    assert tolerance < 0.5 / 30 and "one frame per row" in message
    ds = dl.make_dataset(str(root), tolerance_s=tolerance, image_dtype="uint8")
    assert own_frames([ds[i] for i in range(len(ds))]) == []
    assert validate(open_dataset(str(root)), build_decoder("cpu"), decode="ends").errors != []
    assert validate(open_dataset(str(root)), build_decoder("cpu"), tolerance_s=tolerance, decode="ends").errors == []


DRIFT = {**CASE, "fps": 10, "frames_per_episode": (40, 60), "recorded_timestamps": (0.0, 0.08, 0.0)}
"""The issue's arm: 10 fps, wall-clock timestamps 8% slow against a video of one frame per row at 10 fps (by an
episode's end a row's timestamp is up to 4.7 frames past its own frame)."""


@pytest.fixture(scope="module")
def drifting(tmp_path_factory):
    from dl.testing.synthetic import SyntheticConfig, write_synthetic_dataset

    return write_synthetic_dataset(tmp_path_factory.mktemp("drift") / "ds", SyntheticConfig(**DRIFT))


def test_the_drift_case_is_off_by_more_than_the_rate_slack_and_its_video_is_not(drifting):
    # what the case proves: the rows' rate is 8% off info.json's fps (once refused as a wrong fps), the file's not
    ts = pq.read_table(drifting / "data" / "chunk-000" / "file-000.parquet", columns=["timestamp"])
    spacing = np.median(np.diff(ts.column("timestamp").to_numpy()[:40]))
    assert spacing * 10 == pytest.approx(1.08, abs=1e-4) and spacing * 10 - 1 > RATE_SLACK
    assert np.median(np.diff(frame_times(first_file(drifting)))) == pytest.approx(0.1, abs=1e-6)


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_drift_is_said_in_one_line_and_no_tolerance_is_suggested(drifting, loader):
    meta = open_dataset(str(drifting))
    with pytest.raises(TimestampToleranceError) as err:
        ds = dl.make_dataset(str(drifting), loader=loader)
        list(ds) if loader == "pool" else None
    message = str(err.value)
    episode = int(message.split(": episode ")[1].split(":")[0])
    length = meta.episodes[episode].length
    drift_s = (length - 1) * 0.08 / 10  # the last row's timestamp less its own frame's time
    assert "\n" not in message and "data/chunk-000/file-00" in message and "one of them is wrong" not in message
    assert "Its video holds one frame per row, but its timestamps " in message
    assert (f"drift from them to +{drift_s:.6f} s (+{drift_s * 10:.2f} frames) by the episode's end; LeRobot's "
            "pairing (the file's nearest frame), at a tolerance_s that serves it, would serve ") in message
    assert "--frame-pairing row (frame_pairing=\"row\") serves each row its own frame" in message
    assert "--tolerance-s" not in message


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_row_pairing_serves_each_row_its_own_frame(drifting, loader):
    ds = dl.make_dataset(str(drifting), loader=loader, frame_pairing="row", image_dtype="uint8",
                         delta_timestamps={CAM: [-2 / 10, 0.0, 1 / 10]})
    samples = [ds[i] for i in range(len(ds))] if loader == "map" else list(ds)
    assert len(samples) == sum(open_dataset(str(drifting)).episodes[e].length for e in range(4))
    assert own_frames(samples, windows=True) == []
    last = max(samples, key=lambda s: int(s["frame_index"]))  # the row that drifted furthest gets its own frame
    assert read_frame_code(last[CAM][1])[0] == int(last["index"])


def test_validate_agrees_with_the_loaders_on_drift(drifting):
    found = validate(open_dataset(str(drifting)), build_decoder("cpu"), decode="ends").errors
    per_episode = [f for f in found if f.episodes]
    assert sorted(e for f in per_episode for e in f.episodes) == [0, 1, 2, 3]  # every episode drifts past 1e-4 s
    assert all("--frame-pairing row" in f.message for f in found)  # the dataset's summary line names it too
    assert not any("one of them is wrong" in f.message or "--tolerance-s" in f.message for f in found)
    assert validate(open_dataset(str(drifting)), build_decoder("cpu"), frame_pairing="row", decode="ends").errors == []


def test_row_pairing_refuses_a_span_without_one_frame_per_row():
    # a recording that dropped a frame: its span (from/to timestamps right for 10 rows) shows 9 frames
    times = np.delete(np.arange(20) / 30, 13)
    meta = types.SimpleNamespace(source=types.SimpleNamespace(url="file:///ds"), frame_times=FrameTimes(), files={})
    meta.frame_times.times["videos/cam.mp4"] = times
    span = VideoSpan("videos/cam.mp4", 10 / 30, 20 / 30)
    episode = EpisodeMeta(1, 10, 10, 20, "data/file-000.parquet", {"cam": span}, ("task",))
    with pytest.raises(DatasetFormatError) as err:
        check_pairing("file:///ds/data/file-000.parquet", meta, episode)
    assert str(err.value) == (
        "file:///ds/data/file-000.parquet: episode 1: camera cam's span of videos/cam.mp4 ([0.333333, 0.666667) s) "
        "holds 9 frames for 10 rows; frame_pairing=\"row\" needs one frame per row. Pair by timestamp (the default) "
        "or leave the episode out.")
    check_pairing("file:///ds/data/file-000.parquet", meta, EpisodeMeta(
        0, 10, 0, 10, "data/file-000.parquet", {"cam": VideoSpan("videos/cam.mp4", 0.0, 10 / 30)}, ("task",)))


def test_frame_times_are_kept_per_file_and_read_again_when_the_file_changes(dataset_factory, tmp_path):
    root = tmp_path / "ds"
    shutil.copytree(dataset_factory(**{**CASE, **SERVED["concatenated"]}), root)
    rel = str(first_file(root).relative_to(root))
    meta = open_dataset(str(root))
    np.testing.assert_allclose(meta.frame_times.of(meta, rel), frame_times(first_file(root)), atol=1e-6)
    kept = list((tmp_path / "dl-cache" / "frame_times").iterdir())
    assert len(kept) == 1
    times_plus_one = np.fromfile(kept[0]) + 1.0
    times_plus_one.tofile(kept[0])  # a later open reads the kept times, not the file's index
    meta = open_dataset(str(root))
    np.testing.assert_array_equal(meta.frame_times.of(meta, rel), times_plus_one)
    shutil.copyfile(root / "videos" / CAM / "chunk-000" / "file-001.mp4", first_file(root))  # the file changes
    meta = open_dataset(str(root))
    np.testing.assert_allclose(meta.frame_times.of(meta, rel), frame_times(first_file(root)), atol=1e-6)
    assert len(list((tmp_path / "dl-cache" / "frame_times").iterdir())) == 2


CONVERTED = Path(__file__).parent / "fixtures" / "lerobot_converted_drift"
"""LeRobot 0.4.4's v2.1 -> v3.0 converter's output (`convert_dataset`, on a local v2.1 root) for an arm at 10 fps: 5
episodes of 50-59 rows whose wall-clock timestamps run 8% slow against per-episode videos of one frame per row, joined
by the converter into one file (`benchmarks/lerobot_made_cases.py write --case lerobot_converted_drift`, run in the
0.4.4 anchor; frame codes are the rows' global indices)."""


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_lerobots_converted_drift_is_said_without_row_pairing_and_served_with_it(loader):
    with pytest.raises(TimestampToleranceError) as err:
        list(dl.make_dataset(str(CONVERTED), loader=loader))
    message = str(err.value)
    assert "\n" not in message and "/data/chunk-000/file-000.parquet: episode " in message
    assert "Its video holds one frame per row" in message and "by the episode's end" in message
    assert "--frame-pairing row" in message and "--tolerance-s" not in message and "one of them is wrong" not in message
    ds = dl.make_dataset(str(CONVERTED), loader=loader, frame_pairing="row", image_dtype="uint8",
                         delta_timestamps={CAM: [-2 / 10, 0.0, 1 / 10]})
    samples = [ds[i] for i in range(len(ds))] if loader == "map" else list(ds)
    assert sorted(int(s["index"]) for s in samples) == list(range(281))
    assert own_frames(samples, windows=True) == []


def test_validate_agrees_with_the_loaders_on_lerobots_converted_drift():
    found = validate(open_dataset(str(CONVERTED)), build_decoder("cpu"), decode="ends").errors
    assert sorted(e for f in found for e in f.episodes) == [0, 1, 2, 3, 4]
    assert validate(open_dataset(str(CONVERTED)), build_decoder("cpu"), frame_pairing="row", decode="ends").errors == []
