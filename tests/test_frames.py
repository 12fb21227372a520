"""Camera frames across the worker boundary (dl.dataloader.frames): channels-last collation, float32 conversion while
stacking (bitwise equal to LeRobot's frames / 255.0), the GPU helper, and when dl's DataLoader has the workers
convert."""

import pytest
import torch
import torch.utils.data
from torch.utils.data import default_collate

import dl
from dl.dataloader.frames import FrameCollate, float32_into, images_to_float, stack_frames
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


@pytest.fixture(params=[1, 2], ids=["one-thread", "two-threads"])
def torch_threads(request):
    """torch's intra-op threads: one in a DataLoader worker (numpy converts), several in the iterating process."""
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


@pytest.mark.parametrize("layout", ["channels_last", "contiguous"])
@pytest.mark.parametrize("window", [None, 3])
def test_float32_stacking_equals_lerobots_division(window, layout, torch_threads):
    frames = hwc_frames(4, window)
    if layout == "contiguous":
        frames = [f.contiguous() for f in frames]
    stacked = stack_frames(frames, float32=True)
    assert stacked.dtype == torch.float32 and stacked.movedim(-3, -1).is_contiguous()
    assert torch.equal(stacked, torch.stack(frames).float() / 255.0)  # LeRobot: frames.type(torch.float32) / 255
    already = stack_frames(list(stacked), float32=True)  # float frames are stacked as they are
    assert torch.equal(already, stacked)


def test_float32_into_every_uint8_value_and_a_strided_output():
    values = torch.arange(256, dtype=torch.uint8).reshape(16, 16)
    out = torch.zeros(16, 32)[:, ::2]
    float32_into(out.numpy(), values.numpy())
    assert torch.equal(out, values.float() / 255.0)


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
    assert ours.facts()["image_float32"].startswith("in the workers' collate")
    assert ours.facts()["collate_fn"] == "dl.dataloader.frames.FrameCollate"
    assert_same_frames(ours, per_sample_float32(small_dataset, loader, options))


def per_sample_float32(root, loader: str, options: dict):
    """Batches of samples converted one by one by the loader (torch's collate: nothing deferred)."""
    reference = dl.make_dataset(str(root), loader=loader, seed=3, loader_options=options)
    plain = dl.make_dataloader(reference, batch_size=5, num_workers=0, collate_fn=default_collate)
    assert "image_float32" not in plain.facts()
    return plain


def assert_same_frames(batches, reference) -> None:
    def by_index(batches):
        return {int(i): {k: b[k][j] for k in (CAM0, CAM1)} for b in batches for j, i in enumerate(b["index"])}

    got, expected = by_index(batches), by_index(reference)
    assert sorted(got) == sorted(expected)
    for index, frames in got.items():
        for key, value in frames.items():
            assert value.dtype == torch.float32 and torch.equal(value, expected[index][key]), (index, key)


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_without_workers_the_collate_converts_and_the_loader_read_directly_gives_float32(small_dataset, loader,
                                                                                         torch_threads):
    options = {"episode_pool_size": 2} if loader == "pool" else {}
    dataset = dl.make_dataset(str(small_dataset), loader=loader, seed=3, loader_options=options)
    ours = dl.make_dataloader(dataset, batch_size=5, num_workers=0)
    assert ours.facts()["image_float32"].startswith("in the collate, in this process")
    batches = iter(ours)
    first = next(batches)
    direct = dataset[0] if loader == "map" else next(iter(dataset))  # between two batches: the loader's own dtype
    assert direct[CAM0].dtype == torch.float32 and direct[CAM1].dtype == torch.float32
    assert_same_frames([first, *batches], per_sample_float32(small_dataset, loader, options))


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true but no accelerator")
def test_which_dataloaders_convert_float32_in_the_collate(small_dataset):
    dataset = dl.make_dataset(str(small_dataset))
    assert "image_float32" in dl.make_dataloader(dataset, num_workers=1, pin_memory=True).facts()
    assert "in this process" in dl.make_dataloader(dataset, num_workers=0).facts()["image_float32"]
    custom = dl.make_dataloader(dataset, num_workers=1, collate_fn=default_collate)
    assert "image_float32" not in custom.facts() and custom.batch_transforms == ()
    assert "image_float32" not in dl.make_dataloader(dl.make_dataset(str(small_dataset), image_dtype="uint8"),
                                                     num_workers=1).facts()


def test_a_plain_torch_dataloader_still_gets_float32(small_dataset):
    dataset = dl.make_dataset(str(small_dataset), seed=1)
    batch = next(iter(torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=1, sampler=dataset.sampler)))
    assert batch[CAM0].dtype == torch.float32 and 0 <= float(batch[CAM0].min()) and float(batch[CAM0].max()) <= 1
