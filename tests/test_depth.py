"""Depth cameras as LeRobot 0.6.1 writes them (lossless 12-bit HEVC with open GOPs, `is_depth_map` in the feature's
info) served as LeRobot 0.6.1 serves them: float32 `[1, H, W]` depth, dequantized, in mm or m; every frame right in
shuffled order; windows and `_is_pad`; left alone by uint8 output and by `resize` (unless `resize_depth`). Bit-exact
equality with LeRobot 0.6.1 itself is benchmarks/lerobot06_cases.py's (it needs LeRobot's venv)."""

import math
import random

import numpy as np
import pytest
import torch

import dl
from dl.contracts.errors import DatasetFormatError
from dl.format.depth import DepthQuantizer
from dl.format.features import is_depth_map
from dl.kits.mp4_index import read_index
from dl.kits.video.frame_grid import leading_pictures
from dl.testing.synthetic import depth_code, read_frame_code

DEPTH = "observation.images.depth"
CASE = dict(episodes=3, frames_per_episode=(20, 30), cameras=1, width=64, height=64, episodes_per_file=3,
            depth_camera=True)


def _want(index: int, unit: str = "mm") -> torch.Tensor:
    return DepthQuantizer().dequantize(torch.from_numpy(depth_code(index, 64, 64))[None], unit)


def test_dequantize_is_lerobots_formula():
    codes = torch.arange(4096, dtype=torch.int16)[None, None]
    metres = DepthQuantizer().dequantize(codes, "m")[0, 0].double()
    low, high = math.log(0.01 + 3.5), math.log(10.0 + 3.5)
    formula = torch.exp(torch.arange(4096).double() * (high - low) / 4095 + low) - 3.5
    assert torch.allclose(metres, formula.clamp(0.01, 10.0), rtol=0, atol=1e-5)  # float32 rounding: < 10 um
    mm = DepthQuantizer().dequantize(codes)[0, 0]
    assert mm.dtype == torch.float32 and mm[0] == 10.0 and mm[-1] == 10000.0 and torch.equal(mm, mm.round())
    linear = DepthQuantizer(0.5, 4.595, 0.0, use_log=False).dequantize(torch.tensor([[[0, 4095]]]), "m")
    assert linear.flatten().tolist() == pytest.approx([0.5, 4.595])


def test_both_writers_depth_keys_are_recognised_and_bad_quantizers_refused():
    assert is_depth_map({"dtype": "video", "info": {"is_depth_map": True}})
    assert is_depth_map({"dtype": "video", "info": {"video.is_depth_map": True}})
    assert not is_depth_map({"dtype": "video", "info": {"video.is_depth_map": False}})
    with pytest.raises(DatasetFormatError, match="depth camera 'd'"):
        DepthQuantizer.of("d", {"info": {"is_depth_map": True, "video.depth_min": 5.0, "video.depth_max": 1.0}})


def test_a_depth_decoder_starts_no_threads_a_forked_worker_could_inherit(dataset_factory):
    """libavcodec's slice threads do not survive a fork: a DataLoader worker that inherits a PyAV decoder with them
    hangs when it frees the decoder. So the depth decoder decodes in the calling thread, as `cpu` does by default."""
    import os

    from dl.kits.video.depth_video import DepthStream

    meta = dl.make_dataset(str(dataset_factory(gop=2, **CASE)), loader="map").meta
    before = len(os.listdir("/proc/self/task"))
    stream = DepthStream(meta.source, meta.episodes[0].videos[DEPTH].path)
    assert stream.frames([0.0, 0.5]).data.shape[0] == 2
    assert len(os.listdir("/proc/self/task")) == before


@pytest.mark.parametrize("gop", [2, 4])
@pytest.mark.parametrize("loader", ["map", "pool"])
def test_every_depth_frame_is_served_right_in_shuffled_order(dataset_factory, gop, loader):
    root = dataset_factory(gop=gop, **CASE)
    dataset = dl.make_dataset(str(root), loader=loader, image_dtype="uint8")
    path = dataset.meta.episodes[0].videos[DEPTH].path
    data = (root / path).read_bytes()
    assert leading_pictures(read_index(lambda a, b: data[a:b], len(data)))  # open GOPs, as LeRobot's depth streams
    if loader == "map":
        order = list(range(dataset.meta.total_frames))
        random.Random(gop).shuffle(order)
        samples = [dataset[i] for i in order]
    else:
        samples = list(dataset)
    assert sorted(int(s["index"]) for s in samples) == list(range(dataset.meta.total_frames))
    for sample in samples:
        index, depth = int(sample["index"]), sample[DEPTH]
        assert depth.dtype == torch.float32 and depth.shape == (1, 64, 64), "uint8 output leaves depth as depth"
        assert torch.equal(depth, _want(index)), index
        assert read_frame_code(sample["observation.images.cam0"])[0] == index


def test_windows_pads_and_metres_through_a_dataloader_with_workers(dataset_factory):
    root = dataset_factory(gop=4, **CASE)
    delta = {DEPTH: [-2 / 30, 0.0, 1 / 30]}
    dataset = dl.make_dataset(str(root), delta_timestamps=delta, depth_output_unit="m")
    lengths = [ep.length for ep in dataset.meta.episodes.values()]
    starts = np.concatenate([[0], np.cumsum(lengths)])
    seen = 0
    for batch in dl.make_dataloader(dataset, batch_size=5, num_workers=2):
        assert batch[DEPTH].shape[1:] == (3, 1, 64, 64) and batch[DEPTH].dtype == torch.float32
        for b, index in enumerate(batch["index"].tolist()):
            episode = int(np.searchsorted(starts, index, side="right")) - 1
            rows = [index + o for o in (-2, 0, 1)]
            pad = [not starts[episode] <= r < starts[episode + 1] for r in rows]
            assert batch[f"{DEPTH}_is_pad"][b].tolist() == pad
            held = [min(max(r, starts[episode]), starts[episode + 1] - 1) for r in rows]
            assert torch.equal(batch[DEPTH][b], torch.stack([_want(int(r), "m") for r in held]))
            seen += 1
    assert seen == len(dataset)


def test_resize_leaves_depth_at_its_size(dataset_factory):
    root = dataset_factory(gop=2, **CASE)
    sample = dl.make_dataset(str(root), decoder_options={"resize": [32, 48]})[7]
    assert sample["observation.images.cam0"].shape == (3, 32, 48)
    assert torch.equal(sample[DEPTH], _want(7))


def test_resize_depth_scales_depth_by_nearest_neighbour(dataset_factory):
    """Asked for (`resize_depth`), depth is scaled to `resize` keeping measured values only: each served pixel is
    the unscaled frame's pixel at nearest-exact positions (floor((i + 0.5) * in / out))."""
    root = dataset_factory(gop=2, **CASE)
    options = {"resize": [32, 48], "resize_depth": True}
    dataset = dl.make_dataset(str(root), decoder_options=options)
    rows = (np.arange(32) + 0.5) * 64 / 32
    cols = (np.arange(48) + 0.5) * 64 / 48
    for index in (0, 7, len(dataset) - 1):
        sample = dataset[index]
        assert sample["observation.images.cam0"].shape == (3, 32, 48)
        want = _want(int(sample["index"]))[:, rows.astype(int)][:, :, cols.astype(int)]
        assert sample[DEPTH].shape == (1, 32, 48) and torch.equal(sample[DEPTH], want)


def test_resize_depth_needs_resize():
    from dl.plugins.cpu_decoder import CpuDecoder

    with pytest.raises(dl.DlError, match="resize_depth scales depth cameras to resize"):
        CpuDecoder(resize_depth=True)


def test_mixture_schema_scales_depth_only_when_asked(dataset_factory):
    from dl.mixture.schema import member_features

    meta = dl.make_dataset(str(dataset_factory(gop=2, **CASE))).meta
    assert member_features(meta, None, (32, 48), {})[DEPTH].shape == (1, 64, 64)
    assert member_features(meta, None, (32, 48), {}, resize_depth=True)[DEPTH].shape == (1, 32, 48)
