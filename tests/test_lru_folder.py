"""dl's tabular cache folder on shared storage (`dl.kits.lru_folder`, the map loader's `arrow_store`): kept under a
byte limit by evicting the least recently used files (never the one in use; a mapped file stays readable after
its eviction), stale temporary files of dead writers removed, concurrent writers of one file safe; and the
store's rows sliced on read, string columns included."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

import dl
from dl.format.metadata import DatasetMeta
from dl.format.tabular import tabular_keys
from dl.kits import lru_folder
from dl.plugins.local_source import local_source
from dl.plugins.map.arrow_store import ArrowEpisodeStore
from dl.testing.synthetic import state_value


def aged(path, size: int, age_s: float):
    path.write_bytes(b"x" * size)
    os.utime(path, (time.time() - age_s, time.time() - age_s))
    return path


def test_eviction_goes_least_recently_used_first_and_keeps_the_file_in_use(tmp_path):
    old, middle, new = (aged(tmp_path / f"{n}.arrow", 100, age) for n, age in (("old", 300), ("mid", 200), ("new", 1)))
    in_use = aged(tmp_path / "in-use.arrow", 100, 400)  # the oldest, but the caller is about to use it
    other = aged(tmp_path / "other.txt", 1000, 500)  # not of this suffix: not counted, not touched
    deleted = lru_folder.evict(tmp_path, ".arrow", 250, keep=in_use)
    assert deleted == [str(old), str(middle)]
    assert in_use.exists() and new.exists() and other.exists()
    lru_folder.touch(new)
    assert time.time() - new.stat().st_mtime < 60


def test_stale_temporary_files_go_and_fresh_ones_stay(tmp_path):
    stale = aged(tmp_path / "a.arrow.node-1-2-x.tmp", 10, lru_folder.STALE_TEMP_S + 60)
    writing = aged(tmp_path / "a.arrow.node-3-4-y.tmp", 10, 5)
    lru_folder.evict(tmp_path, ".arrow", 1 << 30, keep=tmp_path / "a.arrow")
    assert not stale.exists() and writing.exists()
    assert lru_folder.temp_path(tmp_path / "a") != lru_folder.temp_path(tmp_path / "a")


def test_a_file_over_the_limit_alone_is_kept_with_a_warning(tmp_path):
    big = aged(tmp_path / "big.arrow", 500, 1)
    with pytest.warns(UserWarning, match="more than the 0.0 MB"):
        assert lru_folder.evict(tmp_path, ".arrow", 100, keep=big) == []
    assert big.exists()


def test_the_store_evicts_older_selections_and_a_mapped_one_still_reads(small_dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("DL_CACHE_DIR", str(tmp_path / "cache"))
    meta = DatasetMeta.load(local_source(str(small_dataset)))
    keys = tabular_keys(meta)
    first = ArrowEpisodeStore.build(meta, meta.select([0, 1]), keys)
    rows = first.arrays(1)["index"].copy()
    size = os.path.getsize(first.path)
    os.utime(first.path, (time.time() - 60, time.time() - 60))
    second = ArrowEpisodeStore.build(meta, meta.select([2, 3]), keys, limit_bytes=size + 10)
    assert not os.path.exists(first.path) and os.path.exists(second.path)
    np.testing.assert_array_equal(first.arrays(1)["index"], rows)  # mapped before it was evicted
    np.testing.assert_array_equal(first.arrays(0)["index"],
                                  np.arange(meta.episodes[0].dataset_from_index, meta.episodes[0].dataset_to_index))
    rebuilt = ArrowEpisodeStore.build(meta, meta.select([0, 1]), keys)
    assert rebuilt.path == first.path and os.path.exists(rebuilt.path)


BUILD = """
import json, sys
import dl
ds = dl.make_dataset(sys.argv[1], image_dtype="uint8")
print(json.dumps([ds.store.path, [int(ds[i]["index"]) for i in range(len(ds))]]))
"""


@pytest.mark.slow
def test_concurrent_writers_of_one_store_leave_one_whole_file(dataset_factory, tmp_path):
    root = dataset_factory(episodes=12, frames_per_episode=(20, 40), cameras=0, episodes_per_file=4)
    env = {**os.environ, "DL_CACHE_DIR": str(tmp_path / "shared")}
    procs = [subprocess.Popen([sys.executable, "-c", BUILD, str(root)], stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(3)]
    outputs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    paths = {path for path, _ in outputs}
    assert len(paths) == 1 and [name for name in os.listdir(tmp_path / "shared" / "tabular")] == [
        os.path.basename(paths.pop())]
    total = DatasetMeta.load(local_source(str(root))).total_frames
    assert all(served == list(range(total)) for _, served in outputs)


def test_string_columns_are_served_row_by_row(small_dataset, writable_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("DL_CACHE_DIR", str(tmp_path / "cache"))
    root = writable_copy(small_dataset)
    info = json.loads((root / "meta" / "info.json").read_text())
    info["features"]["note"] = {"dtype": "string", "shape": [1], "names": None}
    (root / "meta" / "info.json").write_text(json.dumps(info))
    for path in sorted((root / "data").rglob("*.parquet")):
        table = pq.read_table(path)
        notes = [f"frame {i}" for i in table.column("index").to_pylist()]
        pq.write_table(table.append_column("note", [notes]), path)
    dataset = dl.make_dataset(str(root), image_dtype="uint8")
    for i in (0, 37, len(dataset) - 1):
        sample = dataset[i]
        assert sample["note"] == f"frame {int(sample['index'])}"
        np.testing.assert_array_equal(sample["observation.state"].numpy(), state_value(int(sample["index"]), 6))


def test_a_torn_or_foreign_store_file_is_rebuilt(small_dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("DL_CACHE_DIR", str(tmp_path / "cache"))
    meta = DatasetMeta.load(local_source(str(small_dataset)))
    keys = tabular_keys(meta)
    path = ArrowEpisodeStore.build(meta, meta.select([1]), keys).path
    whole = open(path, "rb").read()
    for broken in (whole[: len(whole) // 2], b"not arrow"):
        with open(path, "wb") as f:
            f.write(broken)
        store = ArrowEpisodeStore.build(meta, meta.select([1]), keys)
        ep = meta.episodes[1]
        np.testing.assert_array_equal(store.arrays(0)["index"], np.arange(ep.dataset_from_index, ep.dataset_to_index))
