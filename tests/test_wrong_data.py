"""Silent wrong data is refused (issue 4/7): each case is a dataset broken one way, checked through the
library (the error type and message) and through `dl run` (the exit status and the one-line message, no
traceback). Where LeRobot itself accepts the data and the values stay right, dl warns once instead."""

import json
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_helpers import dl_subprocess

import dl
from dl.contracts.errors import DatasetFormatError, TimestampToleranceError, UnsafePathError
from dl.testing.synthetic import camera_key

FAST = ["--duration", "0.5", "--warmup-batches", "1", "--single-proc-samples", "2", "--batch-size", "4"]
DATA0 = "data/chunk-000/file-000.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"


def edit_column(path, column, edit):
    """Rewrite one column of a parquet file in place: `edit(numpy values, table) -> new values`."""
    table = pq.read_table(path)
    i = table.schema.get_field_index(column)
    values = edit(table.column(column).to_numpy(), table)
    pq.write_table(table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type)), path)


def edit_info(root, edit):
    info = json.loads((root / "meta/info.json").read_text())
    edit(info)
    (root / "meta/info.json").write_text(json.dumps(info, indent=4))


def dl_run(root, cache, *args):
    proc = dl_subprocess("run", "--root", root, *FAST, *args, cache_dir=cache)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc


# ------------------------------------------------------------------------------ timestamps shifted


@pytest.fixture
def shifted(small_dataset, writable_copy):
    """Episode 1's timestamps shifted by +0.5 s (15 frames at 30 fps): the shifted frames still exist."""
    root = writable_copy(small_dataset)

    def shift(ts, table):
        episode = table.column("episode_index").to_numpy()
        return np.where(episode == 1, ts + np.float32(0.5), ts).astype(np.float32)

    edit_column(root / DATA0, "timestamp", shift)
    return root


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_shifted_timestamps_are_refused(shifted, loader):
    with pytest.raises(TimestampToleranceError) as err:
        dataset = dl.make_dataset(str(shifted), loader=loader, episodes=[1])
        list(dataset) if loader == "pool" else None
    message = str(err.value)
    assert DATA0 in message and "episode 1" in message
    assert "shifted by +0.500000 s (+15.00 frames)" in message
    assert "is 0.500000 s from the nearest frame" in message
    # a tolerance of half a frame or more would serve rows other rows' frames: the row pairing is the fix
    assert "--frame-pairing row" in message and "--tolerance-s" not in message


@pytest.mark.slow  # starts `dl` processes
def test_dl_run_with_shifted_timestamps_fails_naming_the_file(shifted, tmp_path):
    """Through `dl run` with the pool's workers (both loaders' refusals: test_shifted_timestamps_are_refused)."""
    loader = "pool"
    proc = dl_run(shifted, tmp_path / "c", "--loader", loader, "--num-workers", "2", "--out-dir", tmp_path / "out")
    assert proc.returncode == 1
    assert f"{DATA0}: episode 1: row" in proc.stdout.replace("\n", "")
    result = json.loads((tmp_path / "out" / f"{loader}-cpu-single-w2.json").read_text())
    assert result["status"] == "failed" and "shifted by +0.500000 s" in result["error"]
    assert "Traceback" not in result["error"]


# ------------------------------------------------------------------------------ fps in info.json wrong


@pytest.fixture
def wrong_fps(small_dataset, writable_copy):
    """info.json says 60 fps; the timestamps, the streams and every feature's video.fps say 30."""
    root = writable_copy(small_dataset)
    edit_info(root, lambda info: info.update(fps=60))
    return root


def test_fps_disagreeing_with_the_episode_spans_is_refused(wrong_fps):
    with pytest.raises(DatasetFormatError) as err:
        dl.make_dataset(str(wrong_fps), delta_timestamps={"action": [0.0, 1.0]})
    message = str(err.value)
    assert "meta/info.json says fps 60, but the episodes' camera spans in meta/episodes hold one frame per row at " \
           "30.000 fps" in message


def test_fps_disagreeing_with_the_timestamps_is_refused(dataset_factory, writable_copy):
    root = writable_copy(dataset_factory(cameras=0))  # no spans to compare with: the timestamps' spacing says it
    edit_info(root, lambda info: info.update(fps=60))
    with pytest.raises(DatasetFormatError) as err:
        dl.make_dataset(str(root), delta_timestamps={"action": [0.0, 1.0]})
    message = str(err.value)
    assert "spaced 0.033333 s (30.000 fps) but meta/info.json says fps 60" in message and "episode 0" in message


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_dl_run_with_a_wrong_fps_fails(wrong_fps, tmp_path):
    proc = dl_run(wrong_fps, tmp_path / "c", "--num-workers", "0", "--out-dir", tmp_path / "out")
    assert proc.returncode == 2 and "meta/info.json says fps 60" in proc.stderr


# ------------------------------------------------------------------------------ episode absent from meta


@pytest.fixture
def episode_absent(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    table = pq.read_table(root / EPISODES)
    pq.write_table(table.filter(pa.compute.not_equal(table.column("episode_index"), 4)), root / EPISODES)
    return root


def test_an_episode_absent_from_meta_episodes_is_refused(episode_absent):
    with pytest.raises(DatasetFormatError, match=r"total_episodes=6 but meta/episodes has no row for episode\(s\) 4 "):
        dl.make_dataset(str(episode_absent))


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_dl_run_with_an_episode_absent_fails_before_running(episode_absent, tmp_path):
    proc = dl_run(episode_absent, tmp_path / "c", "--out-dir", tmp_path / "out")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("Error: ") and "no row for episode(s) 4" in lines[-1]
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------ what LeRobot accepts: warn once


def test_a_feature_video_fps_off_is_warned_once_and_values_stay_right(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    edit_info(root, lambda info: info["features"][camera_key(0)]["info"].update({"video.fps": 25}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        dataset = dl.make_dataset(str(root), image_dtype="uint8")
        samples = [dataset[i] for i in range(0, len(dataset), 7)]
    messages = [str(w.message) for w in caught if "video.fps" in str(w.message)]
    assert messages == [f"file://{root}/meta/info.json: camera {camera_key(0)} has video.fps 25 but the dataset's "
                        "fps is 30; dl uses fps 30 for timestamps and windows."]
    from dl.testing.synthetic import read_frame_code

    assert all(read_frame_code(s[camera_key(0)])[0] == int(s["index"]) for s in samples)


def test_total_frames_off_with_every_episode_present_is_warned(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    edit_info(root, lambda info: info.update(total_frames=info["total_frames"] + 5))
    with pytest.warns(UserWarning, match=r"says total_frames=\d+, but the episodes in meta/episodes hold \d+ frames"):
        dl.make_dataset(str(root))


# ------------------------------------------------------------------------------ paths


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_a_path_template_escaping_the_root_is_refused(small_dataset, writable_copy, tmp_path):
    root = writable_copy(small_dataset)
    edit_info(root, lambda info: info.update(
        video_path="videos/../../outside/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"))
    with pytest.raises(UnsafePathError, match="escapes the dataset root"):
        dl.make_dataset(str(root))
    proc = dl_run(root, tmp_path / "c", "--out-dir", tmp_path / "out")
    assert proc.returncode == 2 and "escapes the dataset root" in proc.stderr and "Download" not in proc.stderr


def test_a_camera_folder_that_is_a_link_inside_the_root_works(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    real = root / "videos" / "cam0-files"
    (root / "videos" / camera_key(0)).rename(real)
    (root / "videos" / camera_key(0)).symlink_to("cam0-files")
    dataset = dl.make_dataset(str(root), image_dtype="uint8")
    from dl.testing.synthetic import read_frame_code

    assert read_frame_code(dataset[5][camera_key(0)]) == (int(dataset[5]["index"]), 0)
