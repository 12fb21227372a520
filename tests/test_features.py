"""`features=[...]`: a sample carries only the selected keys (exact or glob), unselected cameras are never opened or
decoded, unselected columns never read from the parquet, and windows may only name selected keys."""

import pyarrow.parquet as pq
import pytest

import dl
from dl.contracts.errors import DlError
from dl.testing.synthetic import camera_key, read_frame_code

BOOKKEEPING = {"timestamp", "frame_index", "episode_index", "index", "task_index", "task"}


@pytest.fixture
def counted(monkeypatch):
    """`{path: frames}` decoded by every `cpu` decoder built in this test."""
    from dl.plugins import cpu_decoder

    frames: dict[str, int] = {}
    decode = cpu_decoder.CpuDecoder.decode

    def counting(self, source, requests):
        for r in requests:
            frames[r.path] = frames.get(r.path, 0) + len(r.timestamps)
        return decode(self, source, requests)

    monkeypatch.setattr(cpu_decoder.CpuDecoder, "decode", counting)
    return frames


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_one_of_two_cameras_decodes_half_the_frames(small_dataset, counted, loader):
    dataset = dl.make_dataset(str(small_dataset), loader=loader, features=["observation.images.cam1", "action"])
    samples = [dataset[i] for i in range(40)] if loader == "map" else list(dataset)
    assert set(samples[0]) == BOOKKEEPING | {"observation.images.cam1", "action"}
    assert all(read_frame_code(s[camera_key(1)]) == (int(s["index"]), 1) for s in samples)
    assert counted and all("/" + camera_key(1) + "/" in path for path in counted)
    assert sum(counted.values()) == len(samples) if loader == "map" else sum(counted.values()) >= len(samples)
    both = dl.make_dataset(str(small_dataset), loader=loader)
    counted.clear()
    twice = [both[i] for i in range(40)] if loader == "map" else list(both)
    assert sum(counted.values()) >= 2 * len(twice) and {k for k in twice[0] if k.startswith("observation.images")} == {
        camera_key(0), camera_key(1)}


def test_globs_select_and_unselected_columns_are_never_read(small_dataset, monkeypatch):
    read: list[list[str]] = []
    iter_batches = pq.ParquetFile.iter_batches

    def spy(self, *args, columns=None, **kwargs):
        read.append(list(columns or []))
        return iter_batches(self, *args, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    dataset = dl.make_dataset(str(small_dataset), loader="pool", features=["observation.images.*"])
    sample = next(iter(dataset))
    assert set(sample) == BOOKKEEPING | {camera_key(0), camera_key(1)}
    assert read and all("observation.state" not in cols and "action" not in cols for cols in read)


def test_windows_may_only_name_selected_keys(small_dataset):
    with pytest.raises(DlError, match=r"delta_timestamps names action, which features=\['observation.state'\] does "
                                      "not select: add it to features"):
        dl.make_dataset(str(small_dataset), features=["observation.state"], delta_timestamps={"action": [0.0]})
    with pytest.raises(DlError, match=r"features \['observation.images.front'\] select no feature"):
        dl.make_dataset(str(small_dataset), features=["observation.images.front"])
    sample = dl.make_dataset(str(small_dataset), features=["action"], delta_timestamps={"action": [0.0, 1 / 30]})[0]
    assert sample["action"].shape == (2, 6) and sample["action_is_pad"].tolist() == [False, False]
