"""A video span's keyframe marks (`dl.kits.remote.span_reads.keyframe_marks`): a read of some of its frames placed
by them holds every byte the decoder reads, from the keyframe at or before its first frame to the end of the last,
whatever the frame sizes, GOP and span bounds; a track with B-frames keeps none (placed by proportion)."""

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from dl.kits.mp4_index import SampleIndex, read_index
from dl.kits.remote.file_plan import video_part
from dl.kits.remote.span_reads import MARK, MAX_MARKS, ranked_reads

FPS, TIMESCALE = 30, 15360


def track(sizes: list[int], gop: int, pts_order=None) -> SampleIndex:
    """A video track of frames of `sizes` bytes at `FPS`, a keyframe every `gop` frames, in a file with 48 bytes of
    header before them."""
    sizes = np.array(sizes, dtype=np.int64)
    offsets = 48 + np.concatenate([[0], np.cumsum(sizes)[:-1]])
    order = np.arange(len(sizes)) if pts_order is None else np.asarray(pts_order)
    size = int(offsets[-1] + sizes[-1]) + 4096
    return SampleIndex(offsets, sizes, order * (TIMESCALE // FPS), np.arange(len(sizes)) % gop == 0, TIMESCALE,
                       ((0, 48),), size, (size - 4096, size), "av01")


def decoder_reads(index: SampleIndex, first: int, last: int) -> tuple[int, int]:
    """The bytes a decoder needs for frames `first..last`: from their keyframe to the end of the last (what it reads
    past them only fills its buffer: the view ends a fill at bytes not downloaded yet)."""
    key = int(np.flatnonzero(index.keyframes[: first + 1])[-1])
    return int(index.offsets[key]), int(index.offsets[last] + index.sizes[last])


def placed(index: SampleIndex, span: tuple[int, int], chunk: tuple[int, int], with_marks: bool = True):
    """The byte ranges a read of frames `chunk` (inclusive) of the span of frames `span` (half-open) is placed in."""
    from_s, to_s = span[0] / FPS, span[1] / FPS
    part = video_part(index, from_s, to_s)
    read = ((chunk[0] / FPS, (chunk[1] + 1) / FPS, 0),)
    return part, ranked_reads("v.mp4", part.ranges, from_s, to_s, read, part.marks if with_marks else b"")


def covers(ranges, lo: int, hi: int) -> bool:
    return any(r.start <= lo and hi <= r.end for r in ranges)


@settings(max_examples=examples(150), deadline=None, derandomize=True, database=None)
@given(data=st.data(), frames=st.integers(2, 700), gop=st.integers(1, 24))
def test_a_read_placed_by_marks_holds_every_byte_the_decoder_reads(data, frames, gop):
    sizes = data.draw(st.lists(st.integers(200, 60_000), min_size=frames, max_size=frames))
    index = track(sizes, gop)
    start = data.draw(st.integers(0, frames - 1))
    end = data.draw(st.integers(start + 1, frames))
    first = data.draw(st.integers(start, end - 1))
    last = data.draw(st.integers(first, end - 1))
    part, ranges = placed(index, (start, end), (first, last))
    assert 0 < len(part.marks) // MARK.itemsize <= MAX_MARKS
    assert covers(ranges, *decoder_reads(index, first, last))


def test_marks_place_reads_where_a_proportion_misses():
    # a keyframe of 60 KB every 12 frames of 4 KB, and a scene whose frames grow to 20 KB half-way: the proportion
    # starts after the keyframe; the marks hold the keyframe and every frame, and end at the next keyframe
    sizes = [60_000 if i % 12 == 0 else (4_000 if i < 150 else 20_000) for i in range(300)]
    index = track(sizes, 12)
    _, by_marks = placed(index, (0, 300), (100, 107))
    _, by_share = placed(index, (0, 300), (100, 107), with_marks=False)
    lo, hi = decoder_reads(index, 100, 107)
    assert covers(by_marks, lo, hi) and not covers(by_share, lo, hi)
    assert by_marks[0].start == lo  # the keyframe itself
    assert by_marks[-1].end == index.offsets[108]  # the next keyframe


def test_a_track_with_b_frames_keeps_no_marks():
    shown = np.arange(24)
    shown[[1, 2]] = shown[[2, 1]]  # the third frame in the file is shown second
    index = track([5000] * 24, 12, pts_order=shown)
    assert index.reorder_depth > 0 and video_part(index, 0.0, 24 / FPS).marks == b""


def test_marks_of_a_real_video_hold_each_chunk(dataset_factory):
    root = Path(dataset_factory(episodes=2, episodes_per_file=2, frames_per_episode=(60, 60), cameras=1, gop=12,
                                codec="av1"))
    video = next((root / "videos").rglob("*.mp4"))
    data = video.read_bytes()
    index = read_index(lambda a, b: data[a:b], len(data), video.name)
    frames = len(index.offsets)
    assert video_part(index, 0.0, frames / FPS).marks  # AV1 as LeRobot encodes it: no B-frames
    for first in range(0, frames, 8):
        last = min(first + 7, frames - 1)
        _, ranges = placed(index, (0, frames), (first, last))
        assert covers(ranges, *decoder_reads(index, first, last))
