"""Tests for the samples the map loader returns (dl.format.samples, dl.format.delta, dl.plugins.map, the cpu
decoder): values checked against the generator's pure functions and against decoded frame codes."""

import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import torch.utils.data

import dl
from dl.contracts.errors import DlError, MissingFilesError, TimestampToleranceError, VideoDecodeError
from dl.testing.synthetic import action_value, camera_key, read_frame_code, state_value, task_string

FPS = 30
CAMS = [camera_key(0), camera_key(1)]
EPISODES_PARQUET = "meta/episodes/chunk-000/file-000.parquet"
TINY = dict(episodes=2, frames_per_episode=(8, 12), gop=4, episodes_per_file=2)


def edge_positions(ds):
    """First, second, middle and last position of every episode."""
    out = []
    for e, ep in enumerate(ds.episodes):
        start = int(ds.starts[e])
        out += sorted({start, start + 1, start + ep.length // 2, start + ep.length - 1})
    return out


def check_sample(ds, position, image_dtype="float32"):
    """Every field of ds[position] against the generator's values."""
    e, row = ds.locate(position)
    ep = ds.episodes[e]
    index = ep.dataset_from_index + row
    sample = ds[position]
    assert sample["index"].dtype == torch.int64 and sample["index"].shape == ()
    assert sample["index"].item() == index
    assert sample["episode_index"].item() == ep.index and sample["episode_index"].shape == ()
    assert sample["frame_index"].item() == row and sample["frame_index"].dtype == torch.int64
    assert sample["timestamp"].dtype == torch.float32 and sample["timestamp"].shape == ()
    assert sample["timestamp"].item() == np.float32(row / FPS)
    assert sample["task_index"].item() == ep.index % 2
    assert sample["task"] == task_string(ep.index % 2)
    assert sample["observation.state"].dtype == torch.float32 and sample["observation.state"].shape == (6,)
    np.testing.assert_array_equal(sample["observation.state"].numpy(), state_value(index, 6))
    np.testing.assert_array_equal(sample["action"].numpy(), action_value(index, 6))
    for cam, key in enumerate(ds.meta.video_keys):
        frame = sample[key]
        assert frame.shape == (3, 96, 128)
        if image_dtype == "float32":
            assert frame.dtype == torch.float32 and 0.0 <= frame.min() and frame.max() <= 1.0
        else:
            assert frame.dtype == torch.uint8
        assert read_frame_code(frame) == (index, cam), (position, key)
    assert not any(k.endswith("_is_pad") for k in sample)
    return sample


# ------------------------------------------------------------------------------------ plain samples


def test_length_and_positions(small_dataset):
    ds = dl.make_dataset(str(small_dataset))
    assert len(ds) == ds.meta.total_frames == sum(ep.length for ep in ds.episodes)
    assert [ep.index for ep in ds.episodes] == list(range(6))
    for position in edge_positions(ds):
        check_sample(ds, position)
    for bad in (len(ds), -1):
        with pytest.raises(IndexError):
            ds[bad]


def test_selected_episodes_are_in_ascending_order(small_dataset):
    ds = dl.make_dataset(str(small_dataset), episodes=[4, 1, 4])
    assert [ep.index for ep in ds.episodes] == [1, 4]
    ep1, ep4 = ds.episodes
    assert len(ds) == ep1.length + ep4.length
    assert ds[0]["index"].item() == ep1.dataset_from_index
    assert ds[ep1.length - 1]["index"].item() == ep1.dataset_to_index - 1
    assert ds[ep1.length]["index"].item() == ep4.dataset_from_index
    assert ds.position_of(ep4.dataset_from_index + 2) == ep1.length + 2
    with pytest.raises(KeyError):
        ds.position_of(ds.meta.episodes[0].dataset_from_index)
    for position in edge_positions(ds):
        check_sample(ds, position)


def test_no_episodes_selected(small_dataset):
    with pytest.raises(DlError, match="no episodes"):
        dl.make_dataset(str(small_dataset), episodes=[])


@pytest.mark.parametrize("codec", ["h264", "av1", "hevc", "mpeg4"])
def test_every_frame_of_each_codec(dataset_factory, codec):
    root = dataset_factory(codec=codec, **TINY)
    ds = dl.make_dataset(str(root))
    assert ds.decoder.probe(ds.meta.source, ds.episodes[0].videos[CAMS[0]].path)["codec"] == codec
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # info.json and the stream agree: no codec warning
        for position in range(len(ds)):
            check_sample(ds, position)


def test_uint8_and_float32_images(small_dataset):
    f32 = dl.make_dataset(str(small_dataset))
    u8 = dl.make_dataset(str(small_dataset), image_dtype="uint8")
    for position in edge_positions(f32)[::2]:
        a = check_sample(f32, position)
        b = check_sample(u8, position, image_dtype="uint8")
        for key in CAMS:
            assert torch.equal(a[key], b[key].to(torch.float32) / 255.0)
            assert torch.equal(b[key], (a[key] * 255).round().to(torch.uint8))
        for key in ("index", "action", "observation.state", "timestamp"):
            assert torch.equal(a[key], b[key])


def test_bad_image_dtype(small_dataset):
    with pytest.raises(ValueError, match="image_dtype"):
        dl.make_dataset(str(small_dataset), image_dtype="float16")


def test_codec_alias_in_info_json_gives_no_warning(dataset_factory):
    root = dataset_factory(episodes=1, frames_per_episode=(6, 6), cameras=1, info_codec="libx264")
    ds = dl.make_dataset(str(root))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_sample(ds, 0)


def test_codec_disagreement_warns_once(dataset_factory):
    root = dataset_factory(episodes=1, frames_per_episode=(6, 6), cameras=1, info_codec="av1")
    with pytest.warns(UserWarning, match="'av1'.*'h264'"):  # when the dataset is opened, in this process
        ds = dl.make_dataset(str(root))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_sample(ds, 0)  # not again per sample (nor per DataLoader worker)
        check_sample(ds, 1)


# ---------------------------------------------------------------------------------------- windows

OFFSETS = [-2, -1, 0, 1, 3]


def expected_window(row, length, offsets):
    target = np.asarray(offsets) + row
    return np.clip(target, 0, length - 1), (target < 0) | (target >= length)


def check_window(ds, position, offsets, keys):
    e, row = ds.locate(position)
    ep = ds.episodes[e]
    rows, pad = expected_window(row, ep.length, offsets)
    index = ep.dataset_from_index + rows
    sample = ds[position]
    assert sample["index"].item() == ep.dataset_from_index + row
    for key in keys:
        mask = sample[f"{key}_is_pad"]
        assert mask.dtype == torch.bool and mask.tolist() == pad.tolist(), (position, key)
        if key == "action":
            assert sample[key].shape == (len(offsets), 6) and sample[key].dtype == torch.float32
            np.testing.assert_array_equal(sample[key].numpy(), action_value(index, 6))
        elif key == "observation.state":
            np.testing.assert_array_equal(sample[key].numpy(), state_value(index, 6))
        else:
            cam = CAMS.index(key)
            assert sample[key].shape == (len(offsets), 3, 96, 128)
            assert [read_frame_code(f) for f in sample[key]] == [(int(i), cam) for i in index], (position, key)
    for key in set(CAMS) - set(keys):
        assert sample[key].shape == (3, 96, 128) and f"{key}_is_pad" not in sample
        assert read_frame_code(sample[key]) == (ep.dataset_from_index + row, CAMS.index(key))
    for key in {"action", "observation.state"} - set(keys):
        assert sample[key].shape == (6,) and f"{key}_is_pad" not in sample
    return sample, rows, pad


def test_delta_windows_at_episode_edges(small_dataset):
    keys = ["action", CAMS[1], "observation.state"]
    ds = dl.make_dataset(str(small_dataset), delta_timestamps={k: [o / FPS for o in OFFSETS] for k in keys})
    for position in edge_positions(ds):
        check_window(ds, position, OFFSETS, keys)
    # spelled out at the first and last frame of episode 2
    e2 = ds.episodes[2]
    start = int(ds.starts[2])
    sample, rows, pad = check_window(ds, start, OFFSETS, keys)
    assert rows.tolist() == [0, 0, 0, 1, 3] and pad.tolist() == [True, True, False, False, False]
    assert sample["action"][:, 0].tolist() == [-(e2.dataset_from_index + 1 + r) for r in (0, 0, 0, 1, 3)]
    sample, rows, pad = check_window(ds, start + e2.length - 1, OFFSETS, keys)
    last = e2.length - 1
    assert rows.tolist() == [last - 2, last - 1, last, last, last]
    assert pad.tolist() == [False, False, False, True, True]
    assert [read_frame_code(f)[0] for f in sample[CAMS[1]]] == [e2.dataset_from_index + r for r in rows]
    # one before the last frame: only the +3 offset pads
    _, _, pad = check_window(ds, start + e2.length - 2, OFFSETS, keys)
    assert pad.tolist() == [False, False, False, False, True]


def test_delta_window_on_one_camera_only(small_dataset):
    ds = dl.make_dataset(str(small_dataset), delta_timestamps={CAMS[0]: [o / FPS for o in OFFSETS]})
    for position in edge_positions(ds)[:8]:
        check_window(ds, position, OFFSETS, [CAMS[0]])


def test_window_longer_than_episode(dataset_factory):
    root = dataset_factory(**TINY)
    ds = dl.make_dataset(str(root), episodes=[1])
    length = ds.episodes[0].length
    offsets = list(range(length + 6))
    ds = dl.make_dataset(str(root), episodes=[1],
                         delta_timestamps={"action": [o / FPS for o in offsets], CAMS[0]: [o / FPS for o in offsets]})
    sample, rows, pad = check_window(ds, 0, offsets, ["action", CAMS[0]])
    assert pad.sum() == 6 and rows.tolist() == [*range(length), *[length - 1] * 6]
    _, rows, pad = check_window(ds, length - 1, offsets, ["action", CAMS[0]])
    assert pad.tolist() == [False] + [True] * (length + 5) and set(rows.tolist()) == {length - 1}
    back = [-o for o in offsets]
    ds = dl.make_dataset(str(root), episodes=[1], delta_timestamps={"observation.state": [o / FPS for o in back]})
    _, rows, pad = check_window(ds, length - 1, back, ["observation.state"])
    assert pad.sum() == 6 and rows.tolist() == [*range(length - 1, -1, -1), *[0] * 6]


def test_delta_windows_through_a_dataloader(small_dataset):
    keys = ["action", CAMS[0]]
    ds = dl.make_dataset(str(small_dataset), episodes=[0],
                         delta_timestamps={k: [o / FPS for o in OFFSETS] for k in keys})
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=4, shuffle=False)))
    assert batch["action"].shape == (4, 5, 6) and batch["action_is_pad"].shape == (4, 5)
    assert batch[CAMS[0]].shape == (4, 5, 3, 96, 128) and batch[CAMS[1]].shape == (4, 3, 96, 128)
    assert batch["action_is_pad"][:, 0].tolist() == [True, True, False, False]
    assert batch["task"] == [task_string(0)] * 4


def test_delta_timestamps_unknown_key(small_dataset):
    with pytest.raises(DlError) as err:
        dl.make_dataset(str(small_dataset), delta_timestamps={"actions": [0.0]})
    assert "'actions'" in str(err.value) and "observation.images.cam0" in str(err.value)


def test_delta_timestamps_not_multiple_of_frame(small_dataset):
    with pytest.raises(DlError) as err:
        dl.make_dataset(str(small_dataset), delta_timestamps={"action": [0.0, 1 / FPS, 0.5 / FPS]})
    message = str(err.value)
    assert "'action'" in message and "multiples of 1/fps" in message and str(0.5 / FPS) in message
    assert str(1 / FPS) not in message.split("offsets")[1].split("are not")[0]


def test_delta_timestamps_within_tolerance_of_a_frame_is_accepted(small_dataset):
    ds = dl.make_dataset(str(small_dataset), delta_timestamps={"action": [1 / FPS + 5e-5, -2 / FPS]})
    assert ds[5]["action"][:, 0].tolist() == [-(5 + 1 + 1), -(3 + 1)]
    with pytest.raises(DlError, match="multiples"):
        dl.make_dataset(str(small_dataset), delta_timestamps={"action": [1 / FPS + 5e-5]}, tolerance_s=1e-5)


def test_delta_timestamps_empty_offsets(small_dataset):
    with pytest.raises(DlError, match="empty"):
        dl.make_dataset(str(small_dataset), delta_timestamps={"action": []})


# ----------------------------------------------------------------------------------- video errors


def shift_from_timestamp(root, key, episode, seconds, to=0.0):
    path = root / EPISODES_PARQUET
    table = pq.read_table(path)
    for column, by in ((f"videos/{key}/from_timestamp", seconds), (f"videos/{key}/to_timestamp", to)):
        values = table.column(column).to_pylist()
        values[table.column("episode_index").to_pylist().index(episode)] += by
        i = table.schema.get_field_index(column)
        table = table.set_column(i, table.schema.field(i), pa.array(values, pa.float64()))
    pq.write_table(table, path)


def test_timestamp_tolerance_error(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    shift_from_timestamp(root, CAMS[0], 1, 0.3 / FPS)  # every query of episode 1's camera 0 falls between frames
    with pytest.raises(TimestampToleranceError) as err:
        dl.make_dataset(str(root))  # refused up front, with the tolerance that would serve it
    message = str(err.value)
    assert f"videos/{CAMS[0]}/chunk-000/file-000.mp4" in message and "data/chunk-000/file-000.parquet" in message
    assert "episode 1" in message and CAMS[0] in message and "tolerance_s=0.0001" in message
    assert "is 0.010000 s from the nearest frame" in message and "--tolerance-s 0.0101" in message
    # the other episodes of the file are fine; with the suggested tolerance, each row gets its nearest frame
    check_sample(dl.make_dataset(str(root), episodes=[0, 2]), 0)
    ds = dl.make_dataset(str(root), tolerance_s=0.0101, image_dtype="uint8")
    sample = ds[int(ds.starts[1]) + 3]
    assert read_frame_code(sample[CAMS[1]])[0] == int(sample["index"])
    assert read_frame_code(sample[CAMS[0]])[0] == int(sample["index"])


def test_half_a_frame_off_is_not_served_by_a_tolerance(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    shift_from_timestamp(root, CAMS[0], 1, 0.5 / FPS)  # every query falls halfway between two frames
    with pytest.raises(TimestampToleranceError) as err:
        dl.make_dataset(str(root))
    message = str(err.value)
    assert "is 0.016667 s from the nearest frame" in message and "--tolerance-s" not in message
    assert "shifted by +0.016667 s (+0.50 frames)" in message and "--frame-pairing row" in message


def test_small_timestamp_offset_within_tolerance(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    shift_from_timestamp(root, CAMS[1], 2, 5e-5)
    ds = dl.make_dataset(str(root))
    check_sample(ds, int(ds.starts[2]) + 1)
    check_sample(dl.make_dataset(str(root), tolerance_s=1e-5, episodes=[1]), 1)
    with pytest.raises(TimestampToleranceError, match="episode 2"):
        dl.make_dataset(str(root), tolerance_s=1e-5)


def test_timestamp_beyond_video_end(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    shift_from_timestamp(root, CAMS[1], 2, 10.0)  # from_timestamp past to_timestamp: not a span
    with pytest.raises(DlError, match=f"episode 2: camera {CAMS[1]} spans"):
        dl.make_dataset(str(root))
    shift_from_timestamp(root, CAMS[1], 5, 10.0, to=10.0)  # the last span of file-001 moved past the file's end
    ds = dl.make_dataset(str(root), episodes=[0, 5])
    check_sample(ds, 0)
    with pytest.raises(DlError) as err:  # checked the first time this process decodes from file-001
        ds[int(ds.starts[1])]
    message = str(err.value)
    assert f"videos/{CAMS[1]}/chunk-000/file-001.mp4: lasts" in message and "episode 5 needs frames up to" in message
    with pytest.raises(DlError, match="episode 5 needs frames up to"):  # the first episode's files: when built
        dl.make_dataset(str(root), episodes=[3, 5])


def test_corrupt_video_file(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    (root / f"videos/{CAMS[0]}/chunk-000/file-001.mp4").write_bytes(b"not an mp4 at all" * 10)
    ds = dl.make_dataset(str(root))
    with pytest.raises(VideoDecodeError, match="file-001.mp4"):
        ds[int(ds.starts[3])]
    check_sample(ds, 0)


def test_missing_video_file_at_open(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    (root / f"videos/{CAMS[1]}/chunk-000/file-000.mp4").unlink()
    with pytest.raises(MissingFilesError) as err:
        dl.make_dataset(str(root))
    assert err.value.missing == [f"videos/{CAMS[1]}/chunk-000/file-000.mp4"]
    assert err.value.episodes == [0, 1, 2]
    ds = dl.make_dataset(str(root), episodes=[3, 4, 5])
    assert [ep.index for ep in ds.episodes] == [3, 4, 5]
    check_sample(ds, 0)


# ------------------------------------------------------------------------------------- DataLoader


def test_dataloader_with_workers_matches_direct_indexing(dataset_factory):
    root = dataset_factory(episodes=4, frames_per_episode=(10, 16), episodes_per_file=2)
    ds = dl.make_dataset(str(root), image_dtype="uint8")
    direct = [ds[i] for i in range(len(ds))]
    loader = torch.utils.data.DataLoader(ds, batch_size=5, shuffle=False, num_workers=2)
    seen = []
    for batch in loader:
        for j in range(len(batch["index"])):
            i = len(seen)
            seen.append(batch["index"][j].item())
            for key in ("index", "episode_index", "frame_index", "action", "observation.state", *CAMS):
                assert torch.equal(batch[key][j], direct[i][key]), (i, key)
            assert batch["task"][j] == direct[i]["task"]
    assert seen == [s["index"].item() for s in direct]
    assert sorted(seen) == list(range(ds.meta.total_frames))


# --------------------------------------------------------------------------------------- open50


def test_open50_first_episode_sample(open50):
    with pytest.warns(UserWarning, match="'h264'.*'mpeg4'"):
        ds = dl.make_dataset(str(open50), episodes=[0, 3])
    ep0, ep3 = ds.episodes
    assert len(ds) == ep0.length + ep3.length
    sample = ds[0]
    assert sample["image"].shape == (3, 480, 640) and sample["image"].dtype == torch.float32
    assert sample["actions"].shape == (34,) and sample["actions"].dtype == torch.float32
    assert sample["task"] == "lingzu teleoperation"
    assert sample["index"].item() == 0 and sample["episode_index"].item() == 0
    last = ds[len(ds) - 1]
    assert last["index"].item() == ep3.dataset_to_index - 1 and last["frame_index"].item() == ep3.length - 1
