"""dl.format.episodes: episode metadata as columns. The columns equal the meta/episodes rows (unsorted,
repeated, multi-task and task-less rows included); `meta.episodes` and selections are read-only views that
build `EpisodeMeta`s on demand; the snapshot maps the columns from an Arrow file and what crosses to
another process is its path; distinct rows match numpy's."""

import json
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from hypothesis_profiles import examples

from dl.contracts.errors import DatasetFormatError, DlError
from dl.format.episodes import EpisodeColumns, EpisodeMeta, VideoSpan, distinct_rows
from dl.format.metadata import DatasetMeta
from dl.plugins.local_source import local_source
from dl.testing.synthetic import camera_key, task_string

EPISODES_PARQUET = "meta/episodes/chunk-000/file-000.parquet"


def load(root) -> DatasetMeta:
    return DatasetMeta.load(local_source(str(root)))


def rows_of(root) -> list[dict]:
    return pq.read_table(root / EPISODES_PARQUET).to_pylist()


def expected_episode(row: dict, info: dict, keys: list[str]) -> EpisodeMeta:
    """What one meta/episodes row means (the LeRobot v3.0 layout), written out field by field."""
    videos = {k: VideoSpan(info["video_path"].format(video_key=k, chunk_index=row[f"videos/{k}/chunk_index"],
                                                     file_index=row[f"videos/{k}/file_index"]),
                           row[f"videos/{k}/from_timestamp"], row[f"videos/{k}/to_timestamp"]) for k in keys}
    data = info["data_path"].format(chunk_index=row["data/chunk_index"], file_index=row["data/file_index"])
    return EpisodeMeta(row["episode_index"], row["length"], row["dataset_from_index"], row["dataset_to_index"], data,
                       videos, tuple(row["tasks"] or ()))


def test_columns_hold_every_row(small_dataset):
    meta = load(small_dataset)
    rows = rows_of(small_dataset)
    assert [meta.episodes[r["episode_index"]] for r in rows] == [expected_episode(r, meta.info, meta.video_keys)
                                                                  for r in rows]
    cols = meta.columns
    assert cols.index.dtype == np.int64 and cols.data_file.dtype == np.int32
    assert cols.data_paths == sorted({meta.episodes[i].data_path for i in meta.episodes})
    assert cols.video_paths[camera_key(1)] == sorted({meta.episodes[i].videos[camera_key(1)].path
                                                      for i in meta.episodes})


def test_mapping_and_selection_are_read_only_views(small_dataset):
    meta = load(small_dataset)
    assert list(meta.episodes) == list(range(6)) and len(meta.episodes) == 6 and 3 in meta.episodes
    assert 6 not in meta.episodes and "3" not in meta.episodes and meta.episodes.get(7) is None
    with pytest.raises(KeyError):
        meta.episodes[-1]
    with pytest.raises(TypeError):
        meta.episodes[2] = meta.episodes[1]
    chosen = meta.select([4, 1, 4])
    assert [ep.index for ep in chosen] == [1, 4] and chosen == [meta.episodes[1], meta.episodes[4]]
    assert chosen.index.tolist() == [1, 4] and chosen.lengths.tolist() == [meta.episodes[i].length for i in (1, 4)]
    assert chosen[-1] == meta.episodes[4] and list(chosen[1:]) == [meta.episodes[4]]
    first, second = chosen
    assert (first.index, second.index) == (1, 4)


def test_unsorted_repeated_and_task_less_rows(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    table = pq.read_table(root / EPISODES_PARQUET)
    rows = table.to_pylist()
    rows[2]["tasks"] = None  # no task
    rows[3]["tasks"] = [task_string(0), task_string(1)]  # two tasks
    replaced = dict(rows[5], dataset_to_index=rows[5]["dataset_to_index"])  # a repeated index: the last row wins
    shuffled = [rows[5], rows[0], rows[3], rows[1], rows[4], rows[2], replaced]
    pq.write_table(pa.Table.from_pylist(shuffled, schema=table.schema), root / EPISODES_PARQUET)
    meta = load(root)
    assert list(meta.episodes) == list(range(6))
    assert meta.episodes[2].tasks == () and meta.episodes[3].tasks == (task_string(0), task_string(1))
    assert meta.episodes[0].tasks == (task_string(0),) and meta.episodes[1].tasks == (task_string(1),)
    for row in rows:
        assert meta.episodes[row["episode_index"]] == expected_episode(row, meta.info, meta.video_keys)


@pytest.mark.parametrize(("column", "value", "message"), [("length", None, "'length' has 1 empty value"),
                                                          ("dataset_from_index", "drop", "lack column(s)")])
def test_bad_columns_are_refused_naming_the_file(small_dataset, writable_copy, column, value, message):
    root = writable_copy(small_dataset)
    table = pq.read_table(root / EPISODES_PARQUET)
    if value == "drop":
        table = table.drop_columns([column])
    else:
        values = pa.array([value] + table.column(column).to_pylist()[1:], pa.int64())
        table = table.set_column(table.schema.get_field_index(column), column, values)
    pq.write_table(table, root / EPISODES_PARQUET)
    with pytest.raises(DatasetFormatError, match=EPISODES_PARQUET) as err:
        load(root)
    assert message in str(err.value)


def test_snapshot_maps_the_columns_and_pickles_as_a_path(small_dataset, tmp_path):
    meta = load(small_dataset)
    path = meta.write_snapshot(tmp_path / "specs")
    again = DatasetMeta.from_snapshot(local_source(str(small_dataset)), path)
    assert again.columns.path == str(tmp_path / "specs" / "episodes.arrow")
    assert dict(again.episodes) == dict(meta.episodes) and again.tasks == meta.tasks and again.files == meta.files
    assert again.info == meta.info and again.stats_document == meta.stats_document
    assert again.total_frames == meta.total_frames
    assert not again.columns.index.flags.writeable  # a view of the mapped file, not a copy
    parsed = DatasetMeta.from_snapshot(local_source(str(small_dataset)), json.loads(open(path).read()))
    assert dict(parsed.episodes) == dict(meta.episodes) and parsed.columns.path == again.columns.path
    crossing = pickle.dumps(again.columns)
    assert len(crossing) < 300 and pickle.loads(crossing).index.tolist() == list(range(6))
    in_memory = pickle.loads(pickle.dumps(meta.columns))  # no file: the arrays themselves, no object per episode
    assert in_memory.episode(5) == meta.episodes[5] and in_memory.path is None
    with pytest.raises(DlError, match="does not belong"):
        DatasetMeta.from_snapshot(local_source(str(tmp_path)), path)


def test_an_arrow_file_of_another_kind_is_refused(tmp_path):
    with pa.OSFile(str(tmp_path / "x.arrow"), "wb") as sink, pa.ipc.new_file(sink, pa.schema([("a", pa.int64())])):
        pass
    with pytest.raises(DatasetFormatError, match="not dl.episodes/1"):
        EpisodeColumns.open(str(tmp_path / "x.arrow"))


def test_selecting_unknown_episodes_names_them(small_dataset):
    with pytest.raises(DlError, match=r"episode\(s\) 7,9 are not in .* \(it has episodes 0-5\)"):
        load(small_dataset).select([0, 7, 9])


@settings(max_examples=examples(60), deadline=None, derandomize=True, database=None)
@given(hnp.arrays(np.int64, st.tuples(st.integers(0, 40), st.integers(1, 4)), elements=st.integers(0, 6)))
def test_distinct_rows_match_numpy(matrix):
    distinct, which = distinct_rows(matrix)
    if not len(matrix):
        assert len(distinct) == 0 and len(which) == 0
        return
    expected, inverse = np.unique(matrix, axis=0, return_inverse=True)
    np.testing.assert_array_equal(distinct, expected)
    np.testing.assert_array_equal(which, inverse.reshape(-1))
