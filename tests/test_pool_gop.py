"""The pool's automatic chunk length follows the videos' keyframe grid: read from real FFmpeg-encoded MP4s' indexes
(`dl.plugins.pool.gop`), and chunks of a multiple of the GOP, so every chunk starts on a keyframe."""

import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from pool_helpers import every_index, pool

from dl.format.metadata import DatasetMeta
from dl.kits.mp4_index import read_index
from dl.plugins.local_source import local_source
from dl.plugins.pool.dataset import MAX_AUTO_CHUNK_FRAMES, auto_chunk_frames
from dl.plugins.pool.gop import ON_GRID_SHARE, episode_gop, grid_gop
from dl.testing.synthetic import SyntheticConfig, camera_key, write_synthetic_dataset

FRAME = 64 * 64 * 3  # bytes of one decoded 64x64 frame


def dataset(root, **config):
    spec = dict(episodes=3, frames_per_episode=(24, 24), cameras=2, width=64, height=64, codec="mpeg4", gop=6,
                episodes_per_file=3)
    write_synthetic_dataset(root, SyntheticConfig(**{**spec, **config}))
    return DatasetMeta.load(local_source(str(root)))


def gops(meta):
    return [episode_gop(meta, meta.select(None)[i]) for i in range(len(meta.select(None)))]


# ------------------------------------------------------------------------------------------ the grid


@settings(max_examples=examples(80), deadline=None, derandomize=True, database=None)
@given(gop=st.integers(1, 16), frames=st.integers(1, 300))
def test_a_regular_grid_from_the_first_frame_is_its_gop(gop, frames):
    keyframes = np.arange(0, frames, gop)
    assert grid_gop(keyframes, frames) == (gop if len(keyframes) > 1 else None)


@settings(max_examples=examples(80), deadline=None, derandomize=True, database=None)
@given(gop=st.integers(2, 16), shift=st.integers(1, 15), frames=st.integers(40, 300))
def test_an_episode_that_starts_between_keyframes_has_no_grid(gop, shift, frames):
    assert grid_gop(np.arange(shift % gop or 1, frames, gop), frames) is None


@settings(max_examples=examples(120), deadline=None, derandomize=True, database=None)
@given(frames=st.integers(2, 200), data=st.data())
def test_a_grid_found_has_its_positions_on_keyframes(frames, data):
    rest = data.draw(st.sets(st.integers(1, frames - 1)))
    keyframes = np.array(sorted({0, *rest}))
    gop = grid_gop(keyframes, frames)
    if gop is not None:
        assert np.isin(np.arange(0, frames, gop), keyframes).mean() >= ON_GRID_SHARE


def test_scene_cut_keyframes_keep_the_grid_and_missing_ones_break_it():
    grid = np.arange(0, 120, 12)
    assert grid_gop(np.sort(np.append(grid, [17, 70])), 120) == 12  # two extra keyframes
    assert grid_gop(np.delete(grid, [3, 6]), 120) is None  # 2 of 10 grid positions are not keyframes


# ------------------------------------------------------------------------------------------ real files


def test_every_camera_of_an_episode_on_its_grid_gives_the_gop(tmp_path):
    assert gops(dataset(tmp_path / "mpeg4")) == [6, 6, 6]
    assert gops(dataset(tmp_path / "av1", codec="av1", gop=2)) == [2, 2, 2]


def test_episodes_that_start_between_keyframes_have_no_grid(tmp_path):
    # one video file per camera encoded in one pass: episode 1 starts at frame 25, episode 2 at 50, and the
    # keyframes lie at multiples of 6 of the file
    assert gops(dataset(tmp_path, frames_per_episode=(25, 25))) == [6, None, None]


def test_b_frames_give_no_grid(tmp_path):
    meta = dataset(tmp_path, codec="h264")
    video = meta.select(None)[0].videos[camera_key(0)]
    index = read_index(lambda a, b: meta.source.read_bytes(video.path, a, b), meta.files[video.path], video.path)
    assert index.reorder_depth > 0, "x264's veryfast preset encodes B-frames"
    assert gops(meta) == [None, None, None]


def test_cameras_with_different_gops_give_their_least_common_multiple(tmp_path):
    meta = dataset(tmp_path)
    path = tmp_path / meta.select(None)[0].videos[camera_key(1)].path
    other = path.with_name("regop.mp4")
    subprocess.run(["ffmpeg", "-loglevel", "error", "-i", str(path), "-c:v", "mpeg4", "-q:v", "2", "-g", "4",
                    str(other)], check=True)
    other.replace(path)
    meta = DatasetMeta.load(local_source(str(tmp_path)))  # the new file's size
    assert gops(meta) == [12, 12, 12]


def test_a_file_that_is_no_mp4_gives_no_grid(tmp_path):
    meta = dataset(tmp_path, episodes=1, episodes_per_file=1, cameras=1)
    path = tmp_path / meta.select(None)[0].videos[camera_key(0)].path
    mkv = path.with_suffix(".mkv")
    subprocess.run(["ffmpeg", "-loglevel", "error", "-i", str(path), "-c", "copy", str(mkv)], check=True)
    mkv.replace(path)
    assert gops(DatasetMeta.load(local_source(str(tmp_path)))) == [None]


# ------------------------------------------------------------------------------------------ the chunk length


@pytest.mark.parametrize(("fitting", "gop", "chunk_frames"),
                         [(9, None, 9), (9, 12, 9), (16, 12, 12), (100, 12, 12), (9, 2, 8), (100, 5, 15),
                          (100, 20, MAX_AUTO_CHUNK_FRAMES), (3, 4, 3), (0, 2, 1), (7, 1, 7)])
def test_auto_chunk_frames_is_the_largest_multiple_of_the_gop_that_fits(fitting, gop, chunk_frames):
    assert auto_chunk_frames(fitting, gop) == chunk_frames


def test_the_pool_cuts_chunks_on_the_keyframe_grid(tmp_path):
    dataset(tmp_path, cameras=1)
    ds = pool(tmp_path, episode_pool_size=3, decode_budget=3 * 8 * FRAME)  # 8 frames fit; the GOP is 6
    assert (ds.order.chunk_frames, ds.order.open_chunks) == (6, 4)
    assert sorted(int(s["index"]) for s in ds) == every_index(ds)
    assert ds.figures(0, 4)["decode_chunk_frames"] == 6
