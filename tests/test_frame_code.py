"""Tests for dl.testing.synthetic's frame code: the pixel code every synthetic frame carries (its dataset row and
camera), read back from raw, textured and converted frames, and refused when damaged."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from dl.testing import synthetic as sd
from dl.testing.synthetic import frame_code, read_frame_code


@pytest.mark.parametrize("width,height", [(64, 64), (128, 96), (640, 480)])
def test_frame_code_round_trip_raw(width, height):
    for index, camera in [(0, 0), (1, 7), (2**24 - 1, 3), (123456, 5)]:
        frame = frame_code(index, camera, width=width, height=height)
        assert frame.dtype == np.uint8 and frame.shape == (height, width, 3)
        assert set(np.unique(frame).tolist()) == {0, 255}
        assert read_frame_code(frame) == (index, camera)
        chw = torch.from_numpy(frame).permute(2, 0, 1)
        assert read_frame_code(chw) == (index, camera)
        assert read_frame_code(chw.float() / 255) == (index, camera)
    assert not np.array_equal(frame_code(5, 0), frame_code(5, 1))


def test_read_frame_code_rejects_garbage():
    frame = frame_code(77, 1)
    with pytest.raises(ValueError, match="ambiguous"):
        read_frame_code(np.full_like(frame, 128))
    flipped = frame.copy()
    flipped[24:48, 64:80] = 255 - flipped[24:48, 64:80]  # invert one data cell (row 1, col 4)
    with pytest.raises(ValueError, match="parity"):
        read_frame_code(flipped)
    with pytest.raises(ValueError, match="marker"):
        read_frame_code(255 - frame)  # inverted corners
    with pytest.raises(ValueError, match="shape"):
        read_frame_code(frame[:, :, 0])
    with pytest.raises(ValueError):
        frame_code(2**24, 0)
    with pytest.raises(ValueError, match="texture"):
        frame_code(1, 0, texture=sd.MAX_TEXTURE + 1)


@settings(max_examples=examples(60), deadline=None)
@given(index=st.integers(0, 2**24 - 1), camera=st.integers(0, 7), texture=st.integers(1, sd.MAX_TEXTURE),
       size=st.sampled_from([(64, 64), (128, 96), (640, 480)]))
def test_textured_frame_code_reads_back(index, camera, texture, size):
    width, height = size
    frame = frame_code(index, camera, width=width, height=height, texture=texture)
    flat = frame_code(index, camera, width=width, height=height)
    assert frame.dtype == np.uint8 and frame.shape == flat.shape
    distance = np.abs(frame.astype(int) - flat)  # every pixel within `texture` of its cell's black or white
    assert distance.max() <= texture and len(np.unique(distance)) > 1
    assert read_frame_code(frame) == (index, camera)
    assert np.array_equal(frame, frame_code(index, camera, width=width, height=height, texture=texture))  # seeded
