"""Tests for dl.format.metadata (DatasetMeta.load / select / missing files), dl.cli.options.parse_episodes and
dl.contracts.errors.format_indices, on generated datasets and on the real open50 dataset (read-only)."""

import json
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dl.cli.options import parse_episodes
from dl.contracts.errors import DatasetFormatError, DlError, MissingFilesError, format_indices
from dl.format.metadata import DEFAULT_KEYS, DatasetMeta, EpisodeMeta, VideoSpan
from dl.plugins.cpu_decoder import CpuDecoder
from dl.plugins.local_source import local_source
from dl.testing.synthetic import SyntheticConfig, camera_key, task_string

# the conftest SMALL dataset: 6 episodes, 3 per file, 2 cameras, h264
SMALL_FIELDS = dict(episodes=6, frames_per_episode=(20, 40), cameras=2, codec="h264", gop=4, episodes_per_file=3,
                    row_group_size=16)
OPEN50_MISSING_EPISODES = [1, 2, 7, 9, 25, 33, 34]

EPISODES_PARQUET = "meta/episodes/chunk-000/file-000.parquet"


def load(root) -> DatasetMeta:
    return DatasetMeta.load(local_source(str(root)))


def rewrite_parquet(path, edit):
    """Read a parquet file, apply `edit(table) -> table`, write it back in place."""
    table = pq.read_table(path)
    pq.write_table(edit(table), path)


# --------------------------------------------------------------------------------------------- loading


def test_load_info_fps_features_and_video_keys(small_dataset):
    meta = load(small_dataset)
    cfg = SyntheticConfig(**SMALL_FIELDS)
    assert meta.fps == 30
    assert meta.video_keys == [camera_key(0), camera_key(1)] == ["observation.images.cam0", "observation.images.cam1"]
    assert list(meta.features) == ["observation.state", "action", *meta.video_keys, "timestamp", "frame_index",
                                   "episode_index", "index", "task_index"]
    assert meta.features["observation.state"]["dtype"] == "float32"
    assert meta.features["observation.state"]["shape"] == [cfg.state_dim]
    assert meta.features["action"]["shape"] == [cfg.action_dim]
    assert meta.features["index"] == {"dtype": "int64", "shape": [1], "names": None}
    for key in meta.video_keys:
        assert meta.features[key]["dtype"] == "video"
        assert meta.info_codec(key) == "h264"
    assert meta.info["codebase_version"] == "v3.0"
    assert meta.total_frames == int(cfg.episode_lengths().sum())
    assert set(DEFAULT_KEYS) <= set(meta.features)
    assert meta.stats_document["index"]["min"] == [0] and meta.stats_document["index"]["max"] == [meta.total_frames - 1]
    assert meta.stats["index"]["max"].tolist() == [meta.total_frames - 1]  # LeRobot's meta.stats: tensors
    assert str(meta.stats["index"]["max"].dtype) == "torch.int64"
    assert str(meta.stats["observation.state"]["mean"].dtype) == "torch.float32"
    assert meta.source.url == f"file://{small_dataset}"


def test_episodes_match_generator_config(small_dataset):
    meta = load(small_dataset)
    cfg = SyntheticConfig(**SMALL_FIELDS)
    lengths = cfg.episode_lengths().tolist()
    starts = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    assert list(meta.episodes) == list(range(6))
    for e, ep in meta.episodes.items():
        assert isinstance(ep, EpisodeMeta)
        file_no, first = e // 3, (e // 3) * 3
        assert ep.index == e
        assert ep.length == lengths[e]
        assert (ep.dataset_from_index, ep.dataset_to_index) == (starts[e], starts[e + 1])
        assert ep.data_path == f"data/chunk-000/file-{file_no:03d}.parquet"
        assert ep.tasks == (task_string(e % 2),)
        assert list(ep.videos) == meta.video_keys
        from_ts = (starts[e] - starts[first]) / 30
        for key, span in ep.videos.items():
            assert span == VideoSpan(f"videos/{key}/chunk-000/file-{file_no:03d}.mp4", pytest.approx(from_ts),
                                     pytest.approx(from_ts + lengths[e] / 30))
        assert ep.files() == [ep.data_path, *(f"videos/{k}/chunk-000/file-{file_no:03d}.mp4" for k in meta.video_keys)]


def test_episodes_match_independent_pyarrow_read(small_dataset):
    meta = load(small_dataset)
    info = json.loads((small_dataset / "meta/info.json").read_text())
    rows = pq.read_table(small_dataset / EPISODES_PARQUET).to_pylist()
    assert len(rows) == len(meta.episodes) == info["total_episodes"]
    for row in rows:
        ep = meta.episodes[row["episode_index"]]
        assert ep.length == row["length"]
        assert ep.dataset_from_index == row["dataset_from_index"]
        assert ep.dataset_to_index == row["dataset_to_index"]
        assert ep.data_path == info["data_path"].format(chunk_index=row["data/chunk_index"],
                                                        file_index=row["data/file_index"])
        for key in meta.video_keys:
            span = ep.videos[key]
            assert span.path == info["video_path"].format(video_key=key,
                                                          chunk_index=row[f"videos/{key}/chunk_index"],
                                                          file_index=row[f"videos/{key}/file_index"])
            assert span.from_timestamp == row[f"videos/{key}/from_timestamp"]
            assert span.to_timestamp == row[f"videos/{key}/to_timestamp"]
            assert (small_dataset / span.path).is_file()
        assert (small_dataset / ep.data_path).is_file()


def test_tasks_from_pandas_index(small_dataset):
    table = pq.read_table(small_dataset / "meta/tasks.parquet")
    assert "__index_level_0__" in table.column_names and "task" not in table.column_names  # as generated
    meta = load(small_dataset)
    assert meta.tasks == {0: task_string(0), 1: task_string(1)} == {0: "pick the red cube", 1: "push the green block"}


def test_tasks_from_task_column(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    pq.write_table(pa.table({"task_index": pa.array([1, 0], pa.int64()), "task": ["second task", "first task"]}),
                   root / "meta/tasks.parquet")
    assert load(root).tasks == {0: "first task", 1: "second task"}


def test_tasks_from_pandas_dataframe_with_named_index(small_dataset, writable_copy):
    # pandas with a *named* index writes the index as a column of that name ('task' here)
    root = writable_copy(small_dataset)
    frame = pd.DataFrame({"task_index": [0, 1]}, index=pd.Index(["alpha", "beta"], name="task"))
    frame.to_parquet(root / "meta/tasks.parquet")
    assert load(root).tasks == {0: "alpha", 1: "beta"}


def test_tasks_without_text_column_is_format_error(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    pq.write_table(pa.table({"task_index": pa.array([0, 1], pa.int64()), "what": ["a", "b"]}),
                   root / "meta/tasks.parquet")
    with pytest.raises(DatasetFormatError, match="tasks.parquet") as err:
        load(root)
    assert "what" in str(err.value) and "task_index" in str(err.value)


def test_missing_tasks_parquet(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    (root / "meta/tasks.parquet").unlink()
    with pytest.raises(DatasetFormatError, match="no meta/tasks.parquet"):
        load(root)


def test_missing_stats_json_gives_empty_stats(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    (root / "meta/stats.json").unlink()
    assert load(root).stats == {}


# ---------------------------------------------------------------------------------------------- errors


def test_v21_dataset_is_rejected(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    info_path = root / "meta/info.json"
    info = json.loads(info_path.read_text())
    info["codebase_version"] = "v2.1"
    info_path.write_text(json.dumps(info))
    with pytest.raises(DatasetFormatError) as err:
        load(root)
    message = str(err.value)
    assert "v2.1" in message and "v3.0" in message
    assert str(root) in message
    assert not isinstance(err.value, MissingFilesError)


def test_missing_codebase_version_is_rejected(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    info_path = root / "meta/info.json"
    info = json.loads(info_path.read_text())
    del info["codebase_version"]
    info_path.write_text(json.dumps(info))
    with pytest.raises(DatasetFormatError, match="unknown-version"):
        load(root)


@pytest.mark.parametrize("key", ["fps", "features", "data_path", "video_path"])
def test_info_json_lacking_a_required_key(small_dataset, writable_copy, key):
    root = writable_copy(small_dataset)
    info_path = root / "meta/info.json"
    info = json.loads(info_path.read_text())
    del info[key]
    info_path.write_text(json.dumps(info))
    with pytest.raises(DatasetFormatError, match=key):
        load(root)


def test_missing_info_json(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    (root / "meta/info.json").unlink()
    with pytest.raises(DatasetFormatError) as err:
        load(root)
    assert "meta/info.json" in str(err.value) and str(root) in str(err.value)


def test_not_a_folder_is_dl_error(tmp_path):
    with pytest.raises(DlError, match="no such folder"):
        local_source(str(tmp_path / "nope"))


def test_episode_row_lacking_column(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    rewrite_parquet(root / EPISODES_PARQUET, lambda t: t.drop_columns(["length"]))
    with pytest.raises(DatasetFormatError) as err:
        load(root)
    assert EPISODES_PARQUET in str(err.value) and "length" in str(err.value)


def test_no_episode_parquet_files(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    (root / EPISODES_PARQUET).unlink()
    with pytest.raises(DatasetFormatError, match=r"meta/episodes"):
        load(root)


def test_missing_video_files_are_all_listed(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    gone = [f"videos/{camera_key(0)}/chunk-000/file-001.mp4", f"videos/{camera_key(1)}/chunk-000/file-001.mp4"]
    for rel in gone:
        (root / rel).unlink()
    meta = load(root)  # loading metadata does not need the videos
    with pytest.raises(MissingFilesError) as err:
        meta.select(None)
    assert err.value.missing == sorted(gone)
    assert err.value.episodes == [3, 4, 5]
    message = str(err.value)
    for rel in gone:
        assert rel in message
    assert "3-5" in message and "2 file(s)" in message
    # only the episodes whose files exist
    assert [e.index for e in meta.select([2, 0, 1])] == [0, 1, 2]
    assert meta.missing_files(list(meta.episodes.values())) == {rel: [3, 4, 5] for rel in gone}
    # a selection touching one affected episode names just that one
    with pytest.raises(MissingFilesError) as err:
        meta.select([0, 4])
    assert err.value.episodes == [4] and err.value.missing == sorted(gone)


def test_missing_data_file_is_listed(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    (root / "data/chunk-000/file-000.parquet").unlink()
    meta = load(root)
    with pytest.raises(MissingFilesError) as err:
        meta.select([1, 3])
    assert err.value.missing == ["data/chunk-000/file-000.parquet"]
    assert err.value.episodes == [1]
    assert [e.index for e in meta.select([3, 4, 5])] == [3, 4, 5]


def test_missing_files_message_truncates_past_50():
    err = MissingFilesError("file:///x", [f"videos/f{i:03d}.mp4" for i in range(60)], list(range(60)), [60, 61])
    message = str(err)
    assert "60 file(s)" in message and "videos/f049.mp4" in message and "videos/f050.mp4" not in message
    assert "..." in message and "0-59" in message
    assert "--episodes 60-61" in message
    assert len(err.missing) == 60


def test_unknown_episode_index(small_dataset):
    meta = load(small_dataset)
    with pytest.raises(DlError) as err:
        meta.select([0, 6, 9, 10])
    assert not isinstance(err.value, MissingFilesError)
    message = str(err.value)
    assert "6,9-10" in message and "0-5" in message


def test_select_sorts_and_dedups(small_dataset):
    meta = load(small_dataset)
    assert [e.index for e in meta.select([5, 1, 5, 3])] == [1, 3, 5]
    assert [e.index for e in meta.select(None)] == list(range(6))
    with pytest.raises(DlError, match="the selection is empty"):
        meta.select([])


# ------------------------------------------------------------------------------- parse_episodes / format


def test_parse_episodes():
    assert parse_episodes("0,3-6,8") == [0, 3, 4, 5, 6, 8]
    assert parse_episodes("7") == [7]
    assert parse_episodes(" 2 , 0 ,1-1") == [0, 1, 2]
    assert parse_episodes("4-5,5,3-4") == [3, 4, 5]
    assert parse_episodes("10-12") == [10, 11, 12]


@pytest.mark.parametrize("text", ["3-1", "", "a", "1,,2", "1-", "-1", "1.5", "0,3-x", "1-2-3"])
def test_parse_episodes_errors(text):
    with pytest.raises(DlError) as err:
        parse_episodes(text)
    message = str(err.value)
    assert "--episodes" in message and repr(text) in message


def test_format_indices():
    assert format_indices([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert format_indices([]) == ""
    assert format_indices([4]) == "4"
    assert format_indices([5, 3, 4, 10]) == "3-5,10"
    assert format_indices([1, 3, 5]) == "1,3,5"
    assert parse_episodes(format_indices([0, 3, 4, 5, 6, 8])) == [0, 3, 4, 5, 6, 8]


def test_format_indices_with_duplicates():
    assert format_indices([2, 1, 2, 3, 3]) == "1-3"


# --------------------------------------------------------------------------------------- real dataset


def test_open50_missing_videos(open50):
    meta = load(open50)
    assert len(meta.episodes) == 50 and meta.fps == 30
    assert meta.video_keys == ["image"]
    with pytest.raises(MissingFilesError) as err:
        meta.select(None)
    expected = [f"videos/image/chunk-000/file-{e:03d}.mp4" for e in OPEN50_MISSING_EPISODES]
    assert err.value.missing == expected
    assert err.value.episodes == OPEN50_MISSING_EPISODES
    message = str(err.value)
    assert "7 file(s)" in message
    for rel in expected:
        assert rel in message
    assert "1-2,7,9,25,33-34" in message
    assert "--episodes 0,3-6,8,10-24,26-32,35-49" in message  # the selection that works, ready to paste
    others = [e for e in range(50) if e not in OPEN50_MISSING_EPISODES]
    assert err.value.usable == others
    selected = meta.select(others)
    assert [e.index for e in selected] == others and len(selected) == 43
    assert all(os.path.isfile(open50 / f) for e in selected for f in e.files())


def test_open50_tasks_and_codecs(open50):
    meta = load(open50)
    assert meta.tasks == {0: "lingzu teleoperation"}
    assert meta.episodes[0].tasks == ("lingzu teleoperation",)
    assert meta.info_codec("image") == "h264"
    probe = CpuDecoder(cache_size=1).probe(meta.source, meta.episodes[0].videos["image"].path)
    assert probe["codec"] == "mpeg4"
    assert (probe["width"], probe["height"]) == (640, 480)
    assert probe["num_frames"] == meta.episodes[0].length
    assert "actions" in meta.features and "action" not in meta.features
