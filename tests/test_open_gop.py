"""Open GOPs (leading B-frames shown before the keyframe they follow in decode order: x265's default, x264's
`open-gop`, LeRobot 0.6.1's lossless 12-bit depth streams): torchcodec's approximate seek returns the next frame for
those B-frames, so the `cpu` decoder's "auto" mode reads the file's mp4 index and seeks exactly there; every frame is
served right in shuffled order, and closed-GOP files keep the fast mode."""

import random

import pytest
from torchcodec.decoders import VideoDecoder

import dl
from dl.host.assembly import build_decoder
from dl.kits.mp4_index import read_index
from dl.kits.video.frame_grid import leading_pictures
from dl.testing.synthetic import camera_key, read_frame_code

OPEN = dict(episodes=3, frames_per_episode=(30, 40), cameras=1, gop=8, episodes_per_file=3)


def _index(path):
    data = path.read_bytes()
    return read_index(lambda start, end: data[start:end], len(data), str(path))


@pytest.mark.parametrize("codec", ["h264", "hevc"])
def test_every_frame_of_an_open_gop_file_is_served_right_in_shuffled_order(dataset_factory, codec):
    root = dataset_factory(codec=codec, open_gop=True, **OPEN)
    dataset = dl.make_dataset(str(root), image_dtype="uint8")
    path = dataset.meta.episodes[0].videos[camera_key(0)].path
    assert leading_pictures(_index(root / path))
    # the case exercises the fault: approximate seeking lands on the next frame for some positions
    approximate = VideoDecoder(str(root / path), seek_mode="approximate")
    order = list(range(len(dataset)))
    random.Random(0).shuffle(order)
    wrong = [i for i in order if read_frame_code(approximate.get_frames_at([i]).data[0])[0] != i]
    assert wrong
    assert build_decoder("cpu").probe(dataset.meta.source, path)["seek_mode"] == "exact"
    assert [read_frame_code(dataset[i][camera_key(0)])[0] for i in order] == order


@pytest.mark.parametrize("codec", ["h264", "hevc"])
def test_closed_gop_files_keep_the_fast_mode(dataset_factory, codec):
    root = dataset_factory(codec=codec, **OPEN)
    dataset = dl.make_dataset(str(root), image_dtype="uint8")
    path = dataset.meta.episodes[0].videos[camera_key(0)].path
    assert not leading_pictures(_index(root / path)) and _index(root / path).reorder_depth > 0  # B-frames
    assert build_decoder("cpu").probe(dataset.meta.source, path)["seek_mode"] == "approximate"
    order = list(range(len(dataset)))
    random.Random(1).shuffle(order)
    assert [read_frame_code(dataset[i][camera_key(0)])[0] for i in order] == order
