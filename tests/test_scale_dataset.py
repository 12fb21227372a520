"""benchmarks/scale_dataset.py, the scale benchmark's generator, at a small size: episodes of 6-14 frames whose
video spans are the encoded file's frame times, meta/episodes split and named as LeRobot names it, written once
into dl's cache folder, and served by dl with the values it claims."""

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import dl
from dl.kits.mp4_index import read_index
from dl.testing.synthetic import read_frame_code

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "scale_dataset.py"
_spec = importlib.util.spec_from_file_location("scale_dataset", SCRIPT)
scale_dataset = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scale_dataset)
KEY = "observation.images.cam0"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """1,001 episodes, 200 per data and video file, 300 rows per meta/episodes file."""
    return scale_dataset.write_scale_dataset(tmp_path_factory.mktemp("scale") / "ds", 1001, per_file=200,
                                             meta_per_file=300)


def _times(path: Path) -> np.ndarray:
    data = path.read_bytes()
    return np.sort(read_index(lambda start, end: data[start:end], len(data), str(path)).pts_s)


def test_layout_and_lengths(root):
    episodes = pq.read_table(sorted((root / "meta" / "episodes").rglob("*.parquet"))).to_pandas()
    assert sorted(str(p.relative_to(root / "meta" / "episodes")) for p in (root / "meta" / "episodes").rglob("*")
                  if p.is_file()) == [f"chunk-000/file-{i:03d}.parquet" for i in range(4)]
    assert episodes["meta/episodes/file_index"].tolist() == [i // 300 for i in range(1001)]
    assert len(list((root / "data").rglob("*.parquet"))) == 6 == len(list((root / "videos").rglob("*.mp4")))
    lengths = episodes["length"].to_numpy()
    assert lengths.min() >= 6 and lengths.max() <= 14 and len(set(lengths.tolist())) == 9
    assert (episodes["dataset_to_index"] - episodes["dataset_from_index"]).tolist() == lengths.tolist()
    full = root / "videos" / KEY / "chunk-000" / "file-000.mp4"
    assert os.stat(full).st_ino == os.stat(root / "videos" / KEY / "chunk-000" / "file-004.mp4").st_ino
    assert os.stat(full).st_ino != os.stat(root / "videos" / KEY / "chunk-000" / "file-005.mp4").st_ino
    assert scale_dataset._chunk_file(1000) == (1, 0, "chunk-001/file-000")


def test_spans_are_the_encoded_frame_times(root):
    episodes = pq.read_table(sorted((root / "meta" / "episodes").rglob("*.parquet"))).to_pandas()
    for file, rows in episodes.groupby(f"videos/{KEY}/file_index"):
        times = _times(root / "videos" / KEY / "chunk-000" / f"file-{file:03d}.mp4")
        starts = np.cumsum(rows["length"].to_numpy()) - rows["length"].to_numpy()
        assert len(times) == rows["length"].sum()
        assert rows[f"videos/{KEY}/from_timestamp"].tolist() == times[starts].tolist()


def test_dl_serves_it(root):
    dataset = dl.make_dataset(str(root), image_dtype="uint8", episodes=[0, 5, 999, 1000])
    for i in range(len(dataset)):
        sample = dataset[i]
        index = int(sample["index"])
        np.testing.assert_allclose(sample["observation.state"].numpy(), index + np.arange(6) / 256, rtol=0, atol=1e-3)
        episode = dataset.meta.select([int(sample["episode_index"])])[0]
        first_in_file = 200 * (episode.index // 200)
        row_in_file = index - int(dataset.meta.select([first_in_file])[0].dataset_from_index)
        assert read_frame_code(sample[KEY])[0] == row_in_file


def test_written_once_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DL_CACHE_DIR", str(tmp_path))
    root = scale_dataset.scale_dataset(20, per_file=10, meta_per_file=7)
    assert root.parent == tmp_path / "scale"
    before = (root / "meta" / "info.json").stat().st_mtime_ns
    assert scale_dataset.scale_dataset(20, per_file=10, meta_per_file=7) == root
    assert (root / "meta" / "info.json").stat().st_mtime_ns == before
    assert [p.name for p in (tmp_path / "scale").iterdir()] == [root.name]


def test_bad_sizes_are_refused(tmp_path):
    with pytest.raises(ValueError, match="even"):
        scale_dataset.write_scale_dataset(tmp_path / "odd", 10, per_file=5)
    with pytest.raises(FileExistsError):
        scale_dataset.write_scale_dataset(tmp_path, 10)


def test_mixture_members_are_named_apart_and_renamed_to_one_set(tmp_path, monkeypatch):
    monkeypatch.setenv("DL_CACHE_DIR", str(tmp_path))
    members = scale_dataset.scale_mixture(3, step=4)
    assert [len(dl.make_dataset(m["root"]).episodes) for m in members] == [4, 8, 12]
    info = json.loads((Path(members[1]["root"]) / "meta" / "info.json").read_text())
    assert "observation.images.top" in info["features"] and KEY not in info["features"]
    mix = dl.make_mixture([dl.make_dataset(m["root"], image_dtype="uint8") for m in members], "frames",
                          rename=[m["rename"] for m in members], samples_per_epoch=24)
    batch = next(iter(dl.make_dataloader(mix, batch_size=24)))
    assert {KEY, "observation.state", "action"} <= set(batch) and "observation.images.top" not in batch
    assert sorted(set(batch["dataset_index"].tolist())) == [0, 1, 2]
    assert scale_dataset.scale_mixture(3, step=4) == members  # written once
