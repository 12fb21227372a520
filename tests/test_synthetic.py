"""Tests for dl.testing.synthetic: LeRobot v3.0 layout, schemas, values, real video round-trips, errors."""

import json
import math
import subprocess
import threading

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from torchcodec.decoders import VideoDecoder

from dl.bench import default_dataset
from dl.bench.default_dataset import DATASET_TAG, default_dataset_root, ensure_default_dataset
from dl.testing import synthetic as sd
from dl.testing.synthetic import (
    CODECS,
    SyntheticConfig,
    action_value,
    camera_key,
    frame_code,
    read_frame_code,
    state_value,
    task_string,
    write_synthetic_dataset,
)

SMALL = SyntheticConfig(episodes=5, frames_per_episode=(20, 40), codec="h264", episodes_per_file=2,
                        row_group_size=16, state_dim=3, action_dim=4, tasks=3, seed=7)
DATA_COLUMNS = ["observation.state", "action", "timestamp", "frame_index", "episode_index", "index", "task_index"]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return write_synthetic_dataset(tmp_path_factory.mktemp("small") / "ds", SMALL)


def read_episodes(root):
    return pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()


def keyframes(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v", "-show_entries", "frame=key_frame",
                          "-of", "csv", str(path)], check=True, capture_output=True, text=True).stdout
    return [i for i, line in enumerate(out.split()) if line.split(",")[1] == "1"]


def stream_codec(path):
    return subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v", "-show_entries", "stream=codec_name",
                           "-of", "csv=p=0", str(path)], check=True, capture_output=True, text=True).stdout.strip()


def test_episode_lengths_are_seeded_and_vary():
    lengths = SMALL.episode_lengths()
    assert lengths.dtype == np.int64 and lengths.shape == (5,)
    assert lengths.min() >= 20 and lengths.max() <= 40 and len(set(lengths.tolist())) > 1
    assert np.array_equal(lengths, SyntheticConfig(seed=7, episodes=5, frames_per_episode=(20, 40))
                          .episode_lengths())
    assert not np.array_equal(lengths, SyntheticConfig(seed=8, episodes=5, frames_per_episode=(20, 40))
                              .episode_lengths())


def test_config_normalises_lengths_to_a_hashable_tuple():
    config = SyntheticConfig(frames_per_episode=[5, 9])
    assert config.frames_per_episode == (5, 9) and config == SyntheticConfig(frames_per_episode=(5, 9))
    assert hash(config) == hash(SyntheticConfig(frames_per_episode=(5, 9)))


def test_layout(small):
    files = sorted(str(p.relative_to(small)) for p in small.rglob("*") if p.is_file())
    expected = [f"data/chunk-000/file-00{k}.parquet" for k in range(3)]
    expected += ["meta/episodes/chunk-000/file-000.parquet", "meta/info.json", "meta/stats.json", "meta/tasks.parquet"]
    expected += [f"videos/observation.images.cam{c}/chunk-000/file-00{k}.mp4" for c in range(2) for k in range(3)]
    assert files == sorted(expected)
    assert [p.name for p in small.parent.iterdir()] == ["ds"]  # the temp folder was renamed away


def test_data_files_schema_values_and_row_groups(small):
    lengths = SMALL.episode_lengths()
    tables = []
    for k, episodes in enumerate([(0, 1), (2, 3), (4,)]):
        f = pq.ParquetFile(small / f"data/chunk-000/file-00{k}.parquet")
        rows = int(sum(lengths[list(episodes)]))
        assert f.metadata.num_rows == rows
        assert f.metadata.num_row_groups == math.ceil(rows / 16)
        assert f.metadata.row_group(0).num_rows == 16
        assert b"pandas" in f.schema_arrow.metadata
        t = f.read()
        assert t.column_names == DATA_COLUMNS
        assert [str(t.schema.field(c).type) for c in DATA_COLUMNS] == [
            "list<element: float>", "list<element: float>", "float", "int64", "int64", "int64", "int64"]
        assert sorted(set(t["episode_index"].to_pylist())) == list(episodes)
        tables.append(t)
    t = pa.concat_tables(tables)
    index = t["index"].to_numpy()
    episode = t["episode_index"].to_numpy()
    frame_index = t["frame_index"].to_numpy()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    assert np.array_equal(index, np.arange(lengths.sum()))
    assert np.array_equal(episode, np.repeat(np.arange(5), lengths))
    assert np.array_equal(frame_index, index - starts[episode])
    assert np.array_equal(t["timestamp"].to_numpy(), (frame_index / 30).astype(np.float32))
    assert np.array_equal(t["task_index"].to_numpy(), episode % 3)
    state = np.array(t["observation.state"].to_pylist(), dtype=np.float32)
    action = np.array(t["action"].to_pylist(), dtype=np.float32)
    assert state.shape == (lengths.sum(), 3) and action.shape == (lengths.sum(), 4)
    assert np.array_equal(state, state_value(index, 3))
    assert np.array_equal(action, action_value(index, 4))
    assert state[57, 2] == np.float32(57 + 2 / 256) and action[57, 1] == np.float32(-(58 + 1 / 256))


def test_episodes_metadata(small):
    lengths = SMALL.episode_lengths()
    rows = read_episodes(small)
    video_cols = [f"videos/{camera_key(c)}/{n}" for c in range(2)
                  for n in ("chunk_index", "file_index", "from_timestamp", "to_timestamp")]
    assert list(rows[0]) == ["episode_index", "tasks", "length", "data/chunk_index", "data/file_index",
                             "dataset_from_index", "dataset_to_index", *video_cols,
                             "meta/episodes/chunk_index", "meta/episodes/file_index"]
    schema = pq.read_schema(small / "meta/episodes/chunk-000/file-000.parquet")
    assert str(schema.field("tasks").type) == "list<element: string>"
    assert schema.field("videos/observation.images.cam1/from_timestamp").type == pa.float64()
    assert schema.field("dataset_from_index").type == pa.int64()
    start = 0
    for e, row in enumerate(rows):
        file_index, first_in_file = e // 2, e - e % 2
        assert row["episode_index"] == e and row["length"] == lengths[e]
        assert row["tasks"] == [task_string(e % 3)]
        assert (row["dataset_from_index"], row["dataset_to_index"]) == (start, start + lengths[e])
        assert (row["data/chunk_index"], row["data/file_index"]) == (0, file_index)
        for c in range(2):
            key = camera_key(c)
            assert (row[f"videos/{key}/chunk_index"], row[f"videos/{key}/file_index"]) == (0, file_index)
            assert row[f"videos/{key}/from_timestamp"] == pytest.approx(lengths[first_in_file:e].sum() / 30)
            assert row[f"videos/{key}/to_timestamp"] == pytest.approx(
                row[f"videos/{key}/from_timestamp"] + lengths[e] / 30)
        assert (row["meta/episodes/chunk_index"], row["meta/episodes/file_index"]) == (0, 0)
        start += lengths[e]


def test_tasks_parquet(small):
    table = pq.read_table(small / "meta/tasks.parquet")
    assert table.column_names == ["task_index", "__index_level_0__"]
    assert table.schema.field("__index_level_0__").type == pa.string()
    assert table.schema.field("task_index").type == pa.int64()
    df = pd.read_parquet(small / "meta/tasks.parquet")
    assert list(df.index) == ["pick the red cube", "push the green block", "stack the blue cup"]
    assert df["task_index"].tolist() == [0, 1, 2]


def test_info_json(small):
    info = json.loads((small / "meta/info.json").read_text())
    lengths = SMALL.episode_lengths()
    assert info["codebase_version"] == "v3.0" and info["robot_type"] == "dl_synthetic"
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (5, lengths.sum(), 3)
    assert (info["chunks_size"], info["fps"], info["splits"]) == (1000, 30, {"train": "0:5"})
    assert (info["data_files_size_in_mb"], info["video_files_size_in_mb"]) == (100, 200)
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    features = info["features"]
    assert list(features) == ["observation.state", "action", "observation.images.cam0", "observation.images.cam1",
                              "timestamp", "frame_index", "episode_index", "index", "task_index"]
    assert features["observation.state"]["shape"] == [3] and features["action"]["shape"] == [4]
    assert features["action"]["dtype"] == "float32" and len(features["action"]["names"]) == 4
    cam = features["observation.images.cam1"]
    assert (cam["dtype"], cam["shape"], cam["names"]) == ("video", [96, 128, 3], ["height", "width", "channels"])
    assert cam["info"] == {"video.height": 96, "video.width": 128, "video.codec": "h264", "video.pix_fmt": "yuv420p",
                           "video.is_depth_map": False, "video.fps": 30, "video.channels": 3, "has_audio": False}
    assert features["timestamp"] == {"dtype": "float32", "shape": [1], "names": None}
    assert features["index"] == {"dtype": "int64", "shape": [1], "names": None}


def test_stats_json(small):
    stats = json.loads((small / "meta/stats.json").read_text())
    n = int(SMALL.episode_lengths().sum())
    assert stats["index"] == {"min": [0], "max": [n - 1], "mean": [pytest.approx((n - 1) / 2)],
                              "std": [pytest.approx(np.arange(n).std())], "count": [n]}
    assert stats["observation.state"]["min"] == pytest.approx([0, 1 / 256, 2 / 256])
    assert stats["action"]["max"] == pytest.approx([-1 - j / 256 for j in range(4)])
    frames = np.stack([frame_code(i, 1) for i in range(n)]) / 255.0
    cam = stats["observation.images.cam1"]
    assert np.array(cam["mean"]).shape == (3, 1, 1) and cam["count"] == [n]
    assert np.array(cam["mean"]).ravel() == pytest.approx(frames.mean(axis=(0, 1, 2)))
    assert np.array(cam["std"]).ravel() == pytest.approx(frames.std(axis=(0, 1, 2)))
    assert np.array(cam["min"]).ravel().tolist() == [0, 0, 0] and np.array(cam["max"]).ravel().tolist() == [1, 1, 1]


def test_state_and_action_values():
    s = state_value(10, 6)
    assert s.dtype == np.float32 and s.shape == (6,)
    assert s.tolist() == [10 + j / 256 for j in range(6)]
    assert action_value(0, 2).tolist() == [-1.0, -(1 + 1 / 256)]
    batch = state_value(np.array([[1, 2], [3, 4]]), 5)
    assert batch.shape == (2, 2, 5) and batch[1, 0, 4] == np.float32(3 + 4 / 256)
    values = np.concatenate([state_value(np.arange(1000), 6).ravel(), action_value(np.arange(1000), 6).ravel()])
    assert len(np.unique(values)) == values.size


@pytest.mark.parametrize("codec", CODECS)
def test_textured_video_reads_back_with_its_stats(tmp_path, codec):
    cfg = SyntheticConfig(episodes=2, frames_per_episode=(12, 12), cameras=1, codec=codec, texture=sd.MAX_TEXTURE)
    root = write_synthetic_dataset(tmp_path / "ds", cfg)
    decoder = VideoDecoder(str(root / "videos/observation.images.cam0/chunk-000/file-000.mp4"))
    assert [read_frame_code(frame) for frame in decoder[:]] == [(i, 0) for i in range(24)]
    frames = np.stack([frame_code(i, 0, texture=cfg.texture) for i in range(24)]) / 255.0
    stats = json.loads((root / "meta/stats.json").read_text())["observation.images.cam0"]
    assert np.array(stats["mean"]).ravel() == pytest.approx(frames.mean(axis=(0, 1, 2)), abs=0.01)
    assert np.array(stats["std"]).ravel() == pytest.approx(frames.std(axis=(0, 1, 2)), abs=0.01)


def test_texture_gives_a_camera_bitrate(tmp_path):
    """Flat cells compress to a few hundred bytes per 640x480 AV1 frame; texture 44 to a robot camera's
    kilobytes (open50: ~6.5 KB per frame), the figure remote benchmarks need to weigh fixed costs right."""
    per_frame = {}
    for texture in (0, 44):
        cfg = SyntheticConfig(episodes=1, frames_per_episode=(30, 30), cameras=1, width=640, height=480,
                              texture=texture)
        root = write_synthetic_dataset(tmp_path / f"t{texture}", cfg)
        per_frame[texture] = (root / "videos/observation.images.cam0/chunk-000/file-000.mp4").stat().st_size / 30
    assert per_frame[0] < 1000 and 4000 < per_frame[44] < 10_000


@pytest.mark.parametrize("codec", CODECS)
def test_video_frames_decode_to_the_right_rows(tmp_path, codec):
    cfg = SyntheticConfig(episodes=3, frames_per_episode=(8, 14), codec=codec, episodes_per_file=2, seed=3)
    root = write_synthetic_dataset(tmp_path / "ds", cfg)
    episodes = read_episodes(root)
    for camera in range(2):
        key = camera_key(camera)
        for file_index in (0, 1):
            path = root / f"videos/{key}/chunk-000/file-00{file_index}.mp4"
            assert stream_codec(path) == codec
            in_file = [e for e in episodes if e[f"videos/{key}/file_index"] == file_index]
            for seek_mode in ("exact", "approximate"):  # LeRobot decodes with approximate seeking
                decoder = VideoDecoder(str(path), seek_mode=seek_mode)
                assert decoder.metadata.num_frames == sum(e["length"] for e in in_file)
                for e in reversed(in_file):  # backwards, so every episode needs a seek
                    seconds = [e[f"videos/{key}/from_timestamp"] + i / 30 for i in range(e["length"])]
                    batch = decoder.get_frames_at(indices=[round(s * 30) for s in seconds][::-1])
                    assert batch.data.shape == (e["length"], 3, 96, 128)
                    got = [read_frame_code(frame) for frame in batch.data]
                    assert got == [(e["dataset_from_index"] + i, camera) for i in reversed(range(e["length"]))]


@pytest.mark.parametrize("codec", CODECS)
def test_keyframe_interval_follows_gop(tmp_path, codec):
    cfg = SyntheticConfig(episodes=1, frames_per_episode=(12, 12), cameras=1, codec=codec, gop=3)
    root = write_synthetic_dataset(tmp_path / "ds", cfg)
    assert keyframes(root / "videos/observation.images.cam0/chunk-000/file-000.mp4") == [0, 3, 6, 9]


def test_info_codec_override_and_no_cameras(tmp_path):
    cfg = SyntheticConfig(episodes=1, frames_per_episode=(5, 5), cameras=1, codec="mpeg4", info_codec="av1")
    root = write_synthetic_dataset(tmp_path / "override", cfg)
    info = json.loads((root / "meta/info.json").read_text())
    assert info["features"]["observation.images.cam0"]["info"]["video.codec"] == "av1"
    assert stream_codec(root / "videos/observation.images.cam0/chunk-000/file-000.mp4") == "mpeg4"

    cfg = SyntheticConfig(episodes=3, frames_per_episode=(50, 60), cameras=0, episodes_per_file=3)
    root = write_synthetic_dataset(tmp_path / "novideo", cfg)
    assert not (root / "videos").exists()
    assert pq.ParquetFile(root / "data/chunk-000/file-000.parquet").metadata.num_row_groups == 1
    assert "videos/" not in " ".join(read_episodes(root)[0])


def test_progress_and_empty_existing_root(tmp_path):
    calls = []
    (tmp_path / "ds").mkdir()
    cfg = SyntheticConfig(episodes=3, frames_per_episode=(2, 3), cameras=1, episodes_per_file=2)
    root = write_synthetic_dataset(tmp_path / "ds", cfg, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 3), (2, 3), (3, 3)]
    assert (root / "meta/info.json").is_file()


def test_refuses_non_empty_root(tmp_path):
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="ds"):
        write_synthetic_dataset(tmp_path / "ds", SyntheticConfig(episodes=1))
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        write_synthetic_dataset(tmp_path / "file", SyntheticConfig(episodes=1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "file"]


@pytest.mark.parametrize("bad", [
    {"codec": "vp9"}, {"episodes": 0}, {"frames_per_episode": (10, 5)}, {"frames_per_episode": (0, 5)},
    {"width": 100}, {"height": 48}, {"cameras": 9}, {"gop": 0}, {"episodes_per_file": 0},
    {"row_group_size": 0}, {"state_dim": 0}, {"action_dim": 257}, {"tasks": 0}, {"fps": 0}, {"info_codec": ""},
    {"texture": -1}, {"texture": 49},
    {"episodes": 200_000, "frames_per_episode": (100, 100)},
])
def test_config_validation(bad):
    with pytest.raises(ValueError, match="SyntheticConfig"):
        SyntheticConfig(**bad)


def test_ffmpeg_failure_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setitem(sd._CODEC_ARGS, "h264", ["-c:v", "no_such_encoder"])
    with pytest.raises(RuntimeError, match="no_such_encoder"):
        write_synthetic_dataset(tmp_path / "ds", SyntheticConfig(episodes=1, codec="h264"))
    assert list(tmp_path.iterdir()) == []


def test_missing_ffmpeg_is_explained(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="apt-get install -y ffmpeg"):
        write_synthetic_dataset(tmp_path / "ds", SyntheticConfig(episodes=1))
    assert not (tmp_path / "ds").exists()


def test_default_dataset_root(tmp_path, monkeypatch):
    monkeypatch.setenv("DL_CACHE_DIR", str(tmp_path / "c"))
    assert default_dataset_root() == tmp_path / "c" / "datasets" / f"default-{DATASET_TAG}"
    monkeypatch.delenv("DL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_dataset_root() == tmp_path / "x" / "dl" / "datasets" / f"default-{DATASET_TAG}"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert default_dataset_root() == tmp_path / "h" / ".cache" / "dl" / "datasets" / f"default-{DATASET_TAG}"


def test_ensure_default_dataset_generates_defaults_once(tmp_path, monkeypatch):
    monkeypatch.setenv("DL_CACHE_DIR", str(tmp_path))
    calls = []
    root = ensure_default_dataset(progress=lambda done, total: calls.append((done, total)))
    assert root == default_dataset_root() and calls[-1] == (24, 24)
    info = json.loads((root / "meta/info.json").read_text())
    assert (info["total_episodes"], info["total_tasks"]) == (24, 2)
    assert info["features"]["observation.images.cam1"]["info"]["video.codec"] == "av1"
    episode = read_episodes(root)[5]
    decoder = VideoDecoder(str(root / "videos/observation.images.cam1/chunk-000/file-001.mp4"))
    frame_at = round((episode["videos/observation.images.cam1/from_timestamp"] + 7 / 30) * 30)
    assert read_frame_code(decoder.get_frames_at(indices=[frame_at]).data[0]) == (episode["dataset_from_index"] + 7, 1)
    calls.clear()
    assert ensure_default_dataset(progress=lambda done, total: calls.append(done)) == root and calls == []


def test_ensure_default_dataset_survives_a_race(tmp_path, monkeypatch):
    monkeypatch.setenv("DL_CACHE_DIR", str(tmp_path))
    small = SyntheticConfig(episodes=2, frames_per_episode=(3, 4), cameras=1)
    monkeypatch.setattr(default_dataset, "DEFAULT_CONFIG", small)
    both_started = threading.Barrier(2, timeout=30)
    results, errors = [], []

    def worker():
        try:
            results.append(ensure_default_dataset(progress=lambda done, total: done == 1 and both_started.wait()))
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and results == [default_dataset_root()] * 2
    assert [p.name for p in default_dataset_root().parent.iterdir()] == [default_dataset_root().name]
    assert json.loads((default_dataset_root() / "meta/info.json").read_text())["total_episodes"] == 2
