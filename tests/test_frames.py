"""Camera frames across the worker boundary (dl.frames): channels-last collation, float32 conversion after the
boundary (bitwise equal to LeRobot's frames / 255.0, into reused buffers that are never reused while held),
the GPU helper, and when dl's DataLoader defers the conversion."""

import pytest
import torch
import torch.utils.data
from torch.utils.data import default_collate

import dl
from dl.frames import FloatFrames, FrameCollate, images_to_float, stack_frames
from dl.testing.synthetic import camera_key

CAM0, CAM1 = camera_key(0), camera_key(1)


def hwc_frames(n, t=None, seed=0):
    """Frames as decoders give them: [C, H, W] (or [T, C, H, W]) views of HWC memory."""
    g = torch.Generator().manual_seed(seed)
    shape = (n, *(() if t is None else (t,)), 48, 64, 3)
    return list(torch.randint(0, 256, shape, dtype=torch.uint8, generator=g).movedim(-1, -3))


@pytest.mark.parametrize("window", [None, 3])
def test_stack_frames_equals_torch_stack_in_channels_last_memory(window):
    frames = hwc_frames(5, window)
    stacked = stack_frames(frames)
    assert torch.equal(stacked, torch.stack(frames))
    assert stacked.movedim(-3, -1).is_contiguous(), "memory order B, (T,) H, W, C"


def test_frame_collate_matches_default_collate_values():
    samples = [{"index": torch.tensor(i), CAM0: f, "task": "t", CAM1: g}
               for i, (f, g) in enumerate(zip(hwc_frames(4), hwc_frames(4, seed=1), strict=True))]
    ours, theirs = FrameCollate([CAM0, CAM1])(samples), default_collate(samples)
    assert list(ours) == list(samples[0])
    for key, value in theirs.items():
        assert torch.equal(ours[key], value) if isinstance(value, torch.Tensor) else ours[key] == value
    pairs = FrameCollate([CAM0])([(1, 2), (3, 4)])  # not sample dicts: default_collate's
    assert [p.tolist() for p in pairs] == [[1, 3], [2, 4]]


@pytest.mark.parametrize("layout", ["channels_last", "contiguous", "strided"])
def test_float_frames_equal_lerobots_division(layout):
    batch = stack_frames(hwc_frames(3, 2))
    if layout == "contiguous":
        batch = batch.contiguous()
    elif layout == "strided":
        batch = batch[:, :, :, ::2]
    converted = FloatFrames([CAM0]).convert(batch)
    assert converted.dtype == torch.float32 and converted.shape == batch.shape
    assert torch.equal(converted, batch.float() / 255.0)  # LeRobot: frames.type(torch.float32) / 255


def test_float_buffers_are_reused_only_when_nothing_holds_them():
    convert = FloatFrames([CAM0], keep=2)
    frames = stack_frames(hwc_frames(4))
    first = convert({CAM0: frames})[CAM0]
    view = first[1:3]  # the caller keeps part of the first batch
    del first
    second = convert({CAM0: stack_frames(hwc_frames(4, seed=1))})[CAM0]
    assert second.data_ptr() != view.data_ptr() - view.storage_offset() * 4
    assert torch.equal(view, frames[1:3].float() / 255.0), "a held batch was overwritten"
    del view
    ptr = second.data_ptr()
    del second
    third = convert({CAM0: frames})[CAM0]
    assert len(convert._buffers) == 2 and torch.equal(third, frames.float() / 255.0)
    assert third.data_ptr() in {s.data_ptr() for s in convert._buffers} and ptr in {
        s.data_ptr() for s in convert._buffers}


def test_images_to_float_moves_and_converts_camera_keys_only():
    batch = {CAM0: stack_frames(hwc_frames(2)), "index": torch.tensor([3, 4]), "task": ["a", "b"],
             "observation.state": torch.ones(2, 6)}
    out = images_to_float(batch, [CAM0], device="cpu")
    assert out[CAM0].dtype == torch.float32 and torch.equal(out[CAM0], batch[CAM0].float() / 255.0)
    assert out["index"].dtype == torch.int64 and out["task"] == ["a", "b"] and batch[CAM0].dtype == torch.uint8


# ------------------------------------------------------------------------------------------ DataLoader


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_workers_send_uint8_and_batches_equal_per_sample_float32(small_dataset, loader):
    options = {"episode_pool_size": 2} if loader == "pool" else {}
    dataset = dl.make_dataset(str(small_dataset), loader=loader, seed=3, loader_options=options)
    ours = dl.make_dataloader(dataset, batch_size=5, num_workers=2)
    assert ours.facts()["image_float32"].startswith("in the iterating process")
    assert ours.facts()["collate_fn"] == "dl.frames.FrameCollate"
    reference = dl.make_dataset(str(small_dataset), loader=loader, seed=3, loader_options=options)
    plain = dl.make_dataloader(reference, batch_size=5, num_workers=0)  # per-sample conversion, no deferral
    assert "image_float32" not in plain.facts()
    def by_index(batches):
        return {int(i): {k: b[k][j] for k in (CAM0, CAM1)} for b in batches for j, i in enumerate(b["index"])}

    got, expected = by_index(ours), by_index(plain)
    assert sorted(got) == sorted(expected)
    for index, frames in got.items():
        for key, value in frames.items():
            assert value.dtype == torch.float32 and torch.equal(value, expected[index][key]), (index, key)


def test_no_deferral_with_pin_memory_a_custom_collate_or_uint8(small_dataset):
    dataset = dl.make_dataset(str(small_dataset))
    assert "image_float32" not in dl.make_dataloader(dataset, num_workers=1, pin_memory=True).facts()
    custom = dl.make_dataloader(dataset, num_workers=1, collate_fn=default_collate)
    assert "image_float32" not in custom.facts() and custom.batch_transforms == ()
    assert "image_float32" not in dl.make_dataloader(dl.make_dataset(str(small_dataset), image_dtype="uint8"),
                                                     num_workers=1).facts()


def test_a_plain_torch_dataloader_still_gets_float32(small_dataset):
    dataset = dl.make_dataset(str(small_dataset), seed=1)
    batch = next(iter(torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=1, sampler=dataset.sampler)))
    assert batch[CAM0].dtype == torch.float32 and 0 <= float(batch[CAM0].min()) and float(batch[CAM0].max()) <= 1
