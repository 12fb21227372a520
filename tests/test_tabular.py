"""Tests for dl.format.tabular: per-episode row reads with row-group pruning, consistency checks against
meta/episodes, Arrow -> numpy conversion; and the map loader's Arrow episode store built from them."""

from itertools import groupby

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dl
from dl.contracts.errors import DatasetFormatError
from dl.format.metadata import DatasetMeta
from dl.format.tabular import read_episode_tables, table_to_arrays, tabular_keys
from dl.plugins.local_source import local_source
from dl.plugins.map.arrow_store import ArrowEpisodeStore
from dl.testing.synthetic import action_value, state_value, task_string

EPISODES_PARQUET = "meta/episodes/chunk-000/file-000.parquet"
KEYS = ["observation.state", "action", "timestamp", "frame_index", "episode_index", "index", "task_index"]


def load(root) -> DatasetMeta:
    return DatasetMeta.load(local_source(str(root)))


def by_file(meta):
    episodes = list(meta.episodes.values())
    return [list(g) for _, g in groupby(sorted(episodes, key=lambda e: e.data_path), key=lambda e: e.data_path)]


def check_episode_table(table: pa.Table, ep, fps=30):
    assert table.num_rows == ep.length
    index = table.column("index").to_numpy()
    np.testing.assert_array_equal(index, np.arange(ep.dataset_from_index, ep.dataset_to_index))
    np.testing.assert_array_equal(table.column("episode_index").to_numpy(), ep.index)
    np.testing.assert_array_equal(table.column("frame_index").to_numpy(), np.arange(ep.length))
    arrays = table_to_arrays(table)
    np.testing.assert_array_equal(arrays["observation.state"], state_value(index, 6))
    np.testing.assert_array_equal(arrays["action"], action_value(index, 6))
    np.testing.assert_array_equal(arrays["timestamp"], (np.arange(ep.length) / fps).astype(np.float32))
    np.testing.assert_array_equal(arrays["task_index"], ep.index % 2)


@pytest.mark.parametrize("fields", [
    dict(),  # conftest SMALL: 16-row groups, 3 episodes per file
    dict(row_group_size=None),  # one row group per file
    dict(row_group_size=7),  # small groups: every episode straddles groups
    dict(episodes_per_file=1),
    dict(episodes_per_file=4, row_group_size=1),
], ids=["rg16", "rg-none", "rg7", "one-episode-per-file", "rg1"])
def test_read_episode_tables_exact_rows(dataset_factory, fields):
    root = dataset_factory(**fields)
    meta = load(root)
    seen = set()
    for group in by_file(meta):
        # the whole file at once, and every episode alone
        tables = read_episode_tables(meta, group, KEYS)
        assert list(tables) == [ep.index for ep in group]
        for ep in group:
            check_episode_table(tables[ep.index], ep)
            alone = read_episode_tables(meta, [ep], KEYS)
            assert list(alone) == [ep.index]
            assert alone[ep.index].equals(tables[ep.index])
            seen.add(ep.index)
    assert seen == set(meta.episodes)


def test_read_episode_tables_column_subset(small_dataset):
    meta = load(small_dataset)
    ep = meta.episodes[4]
    table = read_episode_tables(meta, [ep], ["index", "action"])[4]
    assert table.column_names == ["index", "action"]
    check = table_to_arrays(table)
    np.testing.assert_array_equal(check["action"], action_value(np.arange(ep.dataset_from_index,
                                                                          ep.dataset_to_index), 6))


def test_read_episode_tables_needs_one_file(small_dataset):
    meta = load(small_dataset)
    with pytest.raises(ValueError, match="one file"):
        read_episode_tables(meta, [meta.episodes[0], meta.episodes[3]], KEYS)


def test_read_episode_tables_missing_column(small_dataset):
    meta = load(small_dataset)
    with pytest.raises(DatasetFormatError) as err:
        read_episode_tables(meta, [meta.episodes[0]], [*KEYS, "observation.velocity"])
    assert "observation.velocity" in str(err.value) and "data/chunk-000/file-000.parquet" in str(err.value)


def test_row_group_pruning_reads_only_overlapping_groups(dataset_factory, monkeypatch):
    root = dataset_factory(row_group_size=7)
    meta = load(root)
    calls = []
    original = pq.ParquetFile.read_row_groups

    def spy(self, row_groups, *args, **kwargs):
        calls.append(list(row_groups))
        return original(self, row_groups, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", spy)
    for group in by_file(meta):
        first = group[0].dataset_from_index
        n_groups = pq.ParquetFile(root / group[0].data_path).num_row_groups
        assert n_groups == -(-sum(e.length for e in group) // 7) and n_groups > 5
        for ep in group:
            calls.clear()
            table = read_episode_tables(meta, [ep], KEYS)[ep.index]
            check_episode_table(table, ep)
            lo, hi = ep.dataset_from_index - first, ep.dataset_to_index - first  # rows within the file
            expected = [g for g in range(n_groups) if g * 7 < hi and (g + 1) * 7 > lo]
            assert calls, "read_row_groups was not used"
            assert all(c == expected for c in calls), (ep.index, calls, expected)
            assert len(expected) < n_groups


def test_row_group_pruning_for_several_episodes(dataset_factory, monkeypatch):
    root = dataset_factory(row_group_size=7)
    meta = load(root)
    group = by_file(meta)[0]
    calls = []
    original = pq.ParquetFile.read_row_groups
    monkeypatch.setattr(pq.ParquetFile, "read_row_groups",
                        lambda self, rg, *a, **k: calls.append(list(rg)) or original(self, rg, *a, **k))
    first = group[0].dataset_from_index
    eps = [group[0], group[2]]
    tables = read_episode_tables(meta, eps, KEYS)
    for ep in eps:
        check_episode_table(tables[ep.index], ep)
    spans = [(ep.dataset_from_index - first, ep.dataset_to_index - first) for ep in eps]
    n_groups = pq.ParquetFile(root / group[0].data_path).num_row_groups
    expected = [g for g in range(n_groups) if any(g * 7 < hi and (g + 1) * 7 > lo for lo, hi in spans)]
    assert calls and all(c == expected for c in calls)
    assert len(expected) < n_groups  # the middle episode's own groups are skipped


def edit_episode_column(root, column, episode, delta):
    path = root / EPISODES_PARQUET
    table = pq.read_table(path)
    values = table.column(column).to_pylist()
    eps = table.column("episode_index").to_pylist()
    values[eps.index(episode)] += delta
    i = table.schema.get_field_index(column)
    pq.write_table(table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type)), path)


@pytest.mark.parametrize("delta", [1, -1])
def test_length_disagreeing_with_meta(small_dataset, writable_copy, delta):
    root = writable_copy(small_dataset)
    edit_episode_column(root, "length", 1, delta)
    edit_episode_column(root, "dataset_to_index", 1, delta)  # meta/episodes stays consistent in itself
    meta = load(root)
    ep = meta.episodes[1]
    with pytest.raises(DatasetFormatError) as err:
        read_episode_tables(meta, [ep], KEYS)
    message = str(err.value)
    assert "data/chunk-000/file-000.parquet" in message and "episode 1" in message
    assert f"{ep.length - delta} rows" in message and f"says {ep.length}" in message
    # other episodes of the same file still read
    check_episode_table(read_episode_tables(meta, [meta.episodes[0]], KEYS)[0], meta.episodes[0])
    # and the loader refuses the dataset at construction
    with pytest.raises(DatasetFormatError, match="episode 1"):
        dl.make_dataset(str(root))


def test_dataset_from_index_disagreeing_with_meta(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    edit_episode_column(root, "dataset_from_index", 4, 1)
    edit_episode_column(root, "dataset_to_index", 4, 1)
    meta = load(root)
    with pytest.raises(DatasetFormatError) as err:
        read_episode_tables(meta, [meta.episodes[4]], KEYS)
    message = str(err.value)
    assert "data/chunk-000/file-001.parquet" in message and "episode 4" in message
    assert f"starts at index {meta.episodes[4].dataset_from_index - 1}" in message


def test_episode_named_in_the_previous_file_is_read_from_its_neighbour(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    # claim episode 3 (the first of file-001) lives in file-000, as LeRobot's v2.1 -> v3.0 converter writes it
    edit_episode_column(root, "data/file_index", 3, -1)
    meta = load(root)
    ep = meta.episodes[3]
    assert ep.data_path == "data/chunk-000/file-000.parquet"
    with pytest.warns(UserWarning, match="episode 3's rows are in data/chunk-000/file-001.parquet, not data/chunk-000/"
                                         "file-000.parquet: meta/episodes names the previous data file"):
        tables = read_episode_tables(meta, [meta.episodes[2], ep], KEYS)
    assert list(tables) == [2, 3]
    check_episode_table(tables[3], ep)
    check_episode_table(tables[2], meta.episodes[2])


def test_episode_in_no_neighbouring_file_is_refused(dataset_factory, writable_copy):
    root = writable_copy(dataset_factory(episodes_per_file=2))  # 3 data files
    edit_episode_column(root, "data/file_index", 5, -2)  # episode 5 (file-002) claimed in file-000
    meta = load(root)
    with pytest.raises(DatasetFormatError) as err:
        read_episode_tables(meta, [meta.episodes[5]], KEYS)
    assert "data/chunk-000/file-000.parquet: episode 5 has 0 rows" in str(err.value)
    assert "neither this file nor its neighbours (data/chunk-000/file-001.parquet)" in str(err.value)


def test_non_contiguous_episode_rows(tmp_path, small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    path = root / "data/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    n = table.num_rows
    order = list(range(n))
    order[0], order[n - 1] = order[n - 1], order[0]  # first row of ep 0 swapped with the last row of ep 2
    pq.write_table(table.take(order), path, row_group_size=n)
    meta = load(root)
    with pytest.raises(DatasetFormatError) as err:
        read_episode_tables(meta, [meta.episodes[0]], KEYS)
    assert "episode 0" in str(err.value) and "contiguous: False" in str(err.value)


def test_table_to_arrays_shapes_and_dtypes(small_dataset):
    meta = load(small_dataset)
    ep = meta.episodes[2]
    arrays = table_to_arrays(read_episode_tables(meta, [ep], KEYS)[2])
    assert list(arrays) == KEYS
    n = ep.length
    expect = {"observation.state": ((n, 6), np.float32), "action": ((n, 6), np.float32),
              "timestamp": ((n,), np.float32), "frame_index": ((n,), np.int64),
              "episode_index": ((n,), np.int64), "index": ((n,), np.int64), "task_index": ((n,), np.int64)}
    for key, (shape, dtype) in expect.items():
        assert arrays[key].shape == shape, key
        assert arrays[key].dtype == dtype, key


def test_table_to_arrays_nested_fixed_and_string_columns():
    table = pa.table({
        "nested": pa.array([[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]], pa.list_(pa.list_(pa.int32()))),
        "fixed": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(6, dtype=np.float64)), 3),
        "text": pa.array(["a", "bc"]),
        "flag": pa.array([True, False]),
    })
    arrays = table_to_arrays(table)
    assert arrays["nested"].shape == (2, 2, 3) and arrays["nested"].dtype == np.int32
    np.testing.assert_array_equal(arrays["nested"], np.arange(1, 13).reshape(2, 2, 3))
    assert arrays["fixed"].shape == (2, 3) and arrays["fixed"].dtype == np.float64
    np.testing.assert_array_equal(arrays["fixed"], np.arange(6.0).reshape(2, 3))
    assert arrays["text"].dtype == object and arrays["text"].tolist() == ["a", "bc"]
    assert arrays["flag"].dtype == bool and arrays["flag"].tolist() == [True, False]


def test_table_to_arrays_on_slices_and_record_batches():
    values = np.arange(30, dtype=np.float32).reshape(10, 3)
    column = pa.ListArray.from_arrays(pa.array(np.arange(0, 31, 3, dtype=np.int32)), pa.array(values.ravel()))
    table = pa.table({"v": column, "i": pa.array(np.arange(10))})
    part = table_to_arrays(table.slice(4, 3))
    np.testing.assert_array_equal(part["v"], values[4:7])
    np.testing.assert_array_equal(part["i"], [4, 5, 6])
    chunked = pa.concat_tables([table.slice(0, 5), table.slice(5, 5)])
    assert chunked.column("v").num_chunks == 2
    np.testing.assert_array_equal(table_to_arrays(chunked)["v"], values)
    batch = table_to_arrays(table.to_batches()[0])
    np.testing.assert_array_equal(batch["v"], values)


def test_table_to_arrays_unequal_rows_not_divisible():
    with pytest.raises(DatasetFormatError, match="'x'"):
        table_to_arrays(pa.table({"x": pa.array([[1.0], [2.0, 3.0]])}))


def test_table_to_arrays_unequal_rows_divisible():
    with pytest.raises(DatasetFormatError, match="unequal"):
        table_to_arrays(pa.table({"x": pa.array([[1.0], [2.0, 3.0, 4.0]])}))


def test_tabular_keys_order_without_cameras(small_dataset):
    meta = load(small_dataset)
    assert tabular_keys(meta) == KEYS
    assert meta.camera_keys == meta.video_keys and meta.image_keys == [] and meta.left_out == {}


# ------------------------------------------------------------------------------------- Arrow store


def test_arrow_store_round_trip(small_dataset):
    meta = load(small_dataset)
    episodes = meta.select([5, 0, 3])
    store = ArrowEpisodeStore.build(meta, episodes, KEYS)
    again = ArrowEpisodeStore.build(meta, episodes, KEYS)
    assert again.path == store.path
    for i, ep in enumerate(episodes):
        arrays = store.arrays(i)
        index = np.arange(ep.dataset_from_index, ep.dataset_to_index)
        np.testing.assert_array_equal(arrays["index"], index)
        np.testing.assert_array_equal(arrays["observation.state"], state_value(index, 6))
        np.testing.assert_array_equal(arrays["action"], action_value(index, 6))
        assert arrays["observation.state"].dtype == np.float32 and arrays["index"].dtype == np.int64
        assert arrays["timestamp"].dtype == np.float32
        assert [task_string(int(t)) for t in arrays["task_index"][:1]] == list(ep.tasks)


def test_arrow_store_rebuilt_when_meta_episodes_change(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    assert len(dl.make_dataset(str(root))) == sum(load(root).episodes[e].length for e in range(6))
    edit_episode_column(root, "length", 1, -1)  # meta now disagrees with the data file
    with pytest.raises(DatasetFormatError, match="episode 1"):
        dl.make_dataset(str(root))
