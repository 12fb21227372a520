"""dl.kits.mp4_index against files FFmpeg writes (AV1, H.264 and HEVC with B-frames, MPEG-4 Part 2; `moov` before
or after the media data) and against torchcodec's own view of them: every frame's presentation time and the
keyframes equal torchcodec's exact scan, and the byte ranges of a span decode to the same frames as the
whole file through a view that serves nothing else."""

import io
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from dl.kits.mp4_index import Mp4IndexError, merge_ranges, read_index

FPS = 30
FRAMES = 90
ENCODERS = {"av1": ["-c:v", "libsvtav1", "-preset", "12", "-g", "2"],
            "h264": ["-c:v", "libx264", "-preset", "veryfast", "-g", "12", "-bf", "3"],
            "hevc": ["-c:v", "libx265", "-preset", "ultrafast", "-tag:v", "hvc1", "-g", "12",
                     "-x265-params", "log-level=error:open-gop=0:bframes=3"],
            "mpeg4": ["-c:v", "mpeg4", "-q:v", "4", "-g", "12"]}


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    """{(codec, faststart): path} of 3 s 160x120 test-pattern videos written by FFmpeg."""
    if shutil.which("ffmpeg") is None:
        pytest.fail("ffmpeg is needed to write the test videos (apt-get install ffmpeg)")
    folder = tmp_path_factory.mktemp("mp4")
    out = {}
    for codec, args in ENCODERS.items():
        for faststart in (False, True):
            path = folder / f"{codec}{'-faststart' if faststart else ''}.mp4"
            subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
                            f"testsrc2=size=160x120:rate={FPS}", "-frames:v", str(FRAMES), "-pix_fmt", "yuv420p",
                            *args, *(["-movflags", "+faststart"] if faststart else []), str(path)], check=True)
            out[codec, faststart] = path
    return out


CASES = [(codec, faststart) for codec in ENCODERS for faststart in (False, True)]


def index_of(path):
    data = path.read_bytes()
    reads = []

    def read(start, end):
        reads.append((start, end))
        return data[start:end]

    return read_index(read, len(data), path.name), reads


@pytest.mark.parametrize(("codec", "faststart"), CASES)
def test_frame_times_and_keyframes_equal_torchcodecs_scan(videos, codec, faststart):
    from torchcodec.decoders import VideoDecoder

    index, reads = index_of(videos[codec, faststart])
    decoder = VideoDecoder(str(videos[codec, faststart]), seek_mode="exact")
    shown = np.argsort(index.pts, kind="stable")  # decode order -> presentation order
    assert len(index.pts) == decoder.metadata.num_frames == FRAMES
    np.testing.assert_allclose(index.pts_s[shown], decoder.get_frames_in_range(0, FRAMES).pts_seconds.numpy())
    assert np.flatnonzero(index.keyframes[shown]).tolist() == decoder._get_key_frame_indices().tolist()
    assert len(reads) == (1 if faststart else 2)  # moov in the first read, or one more read at the end


@pytest.mark.parametrize(("codec", "faststart"), CASES)
def test_samples_tile_the_media_data(videos, codec, faststart):
    index, _ = index_of(videos[codec, faststart])
    order = np.argsort(index.offsets)
    starts, ends = index.offsets[order], index.offsets[order] + index.sizes[order]
    assert (starts[1:] == ends[:-1]).all()  # FFmpeg writes one track's samples back to back
    assert ends[-1] <= index.size and all(b <= index.size for _, b in index.header)
    assert index.reorder_depth == (0 if codec in ("av1", "mpeg4") else 3) or index.reorder_depth > 0


class StrictView(io.RawIOBase):
    """A file serving `ranges` of `data`; a read elsewhere is recorded (and served, as a source's view serves it
    remotely)."""

    def __init__(self, data: bytes, ranges):
        self.data, self.ranges, self.pos, self.misses = data, ranges, 0, []

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=io.SEEK_SET):
        self.pos = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: len(self.data)}[whence] + offset
        return self.pos

    def readinto(self, buffer):
        if self.pos >= len(self.data):
            return 0
        for start, end in self.ranges:
            if start <= self.pos < end:
                chunk = self.data[self.pos:min(end, self.pos + len(buffer))]
                buffer[: len(chunk)] = chunk
                self.pos += len(chunk)
                return len(chunk)
        self.misses.append(self.pos)
        chunk = self.data[self.pos:self.pos + len(buffer)]
        buffer[: len(chunk)] = chunk
        self.pos += len(chunk)
        return len(chunk)


@settings(max_examples=examples(6), deadline=None, derandomize=True, database=None)
@given(first=st.integers(0, FRAMES - 10), length=st.integers(8, 40), case=st.sampled_from(
    CASES))
def test_a_spans_ranges_decode_like_the_whole_file(videos, first, length, case):
    """The span's ranges plus the header suffice for torchcodec to decode the span's frames, equal to the
    whole file's: no read falls at or after the span's first byte outside its ranges (reads before it are
    FFmpeg reading through a short gap instead of seeking, which a source's view serves remotely)."""
    from torchcodec.decoders import VideoDecoder

    path = videos[case]
    data = path.read_bytes()
    index = read_index(lambda a, b: data[a:b], len(data), path.name)
    stop = min(first + length, FRAMES)
    lo, hi, _, _ = index.decode_span(first / FPS, stop / FPS)
    view = StrictView(data, merge_ranges(list(index.header) + index.byte_ranges(lo, hi)))
    got = VideoDecoder(view, seek_mode="approximate").get_frames_in_range(first, stop)
    want = VideoDecoder(str(path), seek_mode="approximate").get_frames_in_range(first, stop)
    assert [m for m in view.misses if m >= index.offsets[lo]] == [] and (got.data == want.data).all()
    assert index.keyframes[lo] and (lo == 0 or index.pts_s[lo] <= first / FPS + 1e-9)


@pytest.mark.parametrize("codec", ["h264", "hevc"])
def test_b_frame_spans_start_at_a_keyframe_and_cover_every_shown_frame(videos, codec):
    index, _ = index_of(videos[codec, False])
    for first, stop in [(0, 30), (13, 47), (50, 90)]:
        lo, hi, shown_lo, shown_hi = index.decode_span(first / FPS, stop / FPS)
        shown = np.flatnonzero((index.pts_s >= first / FPS - 1e-6) & (index.pts_s < stop / FPS - 1e-6))
        assert index.keyframes[lo] and lo <= shown.min() and shown.max() <= hi
        assert (shown_lo, shown_hi) == (shown.min(), shown.max()) and len(shown) == stop - first


def reference_span(index, from_s, to_s):
    """`decode_span` as its docstring defines it, one frame at a time."""
    half = 0.5 * float(np.median(np.diff(np.sort(index.pts)))) / index.timescale
    shown = np.flatnonzero((index.pts_s >= from_s - half) & (index.pts_s < to_s - half))
    if not len(shown):
        return None
    lo, hi = int(shown.min()), int(shown.max())
    keys = np.flatnonzero(index.keyframes[: lo + 1])
    last = min(hi + index.keyframe_interval + index.reorder_depth, len(index.pts) - 1)
    return (int(keys[-1]) if len(keys) else 0), last, lo, hi


@pytest.mark.parametrize(("codec", "faststart"), [c for c in CASES if not c[1]])
def test_spans_planned_at_once_equal_each_planned_alone(videos, codec, faststart):
    index, _ = index_of(videos[codec, faststart])
    rng = np.random.default_rng(0)
    from_s = rng.uniform(-0.5, FRAMES / FPS, 200)
    to_s = from_s + rng.uniform(0, 1.5, 200)
    first, last, lo, hi, empty = index.decode_spans(from_s, to_s)
    for i in range(len(from_s)):
        want = reference_span(index, from_s[i], to_s[i])
        assert empty[i] == (want is None)
        assert empty[i] or (first[i], last[i], lo[i], hi[i]) == want


@settings(max_examples=examples(8), deadline=None, derandomize=True, database=None)
@given(first=st.integers(0, FRAMES - 1), length=st.integers(1, 16), case=st.sampled_from(CASES))
def test_a_read_of_frames_holds_every_byte_its_decode_needs(videos, first, length, case):
    """`frame_ranges` of frames `first..last` (presentation order), the only bytes served besides the header, decode
    them equal to the whole file's: the decoder reads nothing else before the end of the last byte they name (what
    it reads past that only fills its buffer, which a source's view ends at bytes not downloaded)."""
    from torchcodec.decoders import VideoDecoder

    from dl.kits.remote.file_plan import frame_ranges

    path = videos[case]
    data = path.read_bytes()
    index = read_index(lambda a, b: data[a:b], len(data), path.name)
    last = min(first + length, FRAMES) - 1
    ranges = frame_ranges(index, first, last)
    view = StrictView(data, merge_ranges([*index.header, *ranges]))
    got = VideoDecoder(view, seek_mode="approximate").get_frames_in_range(first, last + 1)
    want = VideoDecoder(str(path), seek_mode="approximate").get_frames_in_range(first, last + 1)
    assert (got.data == want.data).all()
    assert [m for m in view.misses if ranges[0][0] <= m < ranges[-1][1]] == []
    key = int(index.offsets[index.frame_samples(first, last)[0]])
    assert ranges[0][0] == key and index.keyframes[index.offsets == key].all()
    shown = np.argsort(index.pts, kind="stable")[first:last + 1]  # these frames' samples, each within one range
    for a, b in zip(index.offsets[shown], index.offsets[shown] + index.sizes[shown], strict=True):
        assert any(lo <= a and b <= hi for lo, hi in ranges)


def test_a_span_outside_the_video_says_so(videos):
    index, _ = index_of(videos["av1", True])
    with pytest.raises(Mp4IndexError, match=r"no frame in \[5\.000, 6\.000\)"):
        index.decode_span(5.0, 6.0)


def test_truncated_and_foreign_files_are_refused_naming_them(videos, tmp_path):
    data = videos["h264", False].read_bytes()
    cut = data[: len(data) // 2]  # moov was at the end: gone
    with pytest.raises(Mp4IndexError, match="cut.mp4"):
        read_index(lambda a, b: cut[a:b], len(cut), "cut.mp4")
    junk = b"not an mp4 at all" * 10
    with pytest.raises(Mp4IndexError, match="junk.bin"):
        read_index(lambda a, b: junk[a:b], len(junk), "junk.bin")


def test_fragmented_mp4_is_refused(videos, tmp_path):
    path = tmp_path / "frag.mp4"
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-i", str(videos["h264", False]), "-c", "copy",
                    "-movflags", "frag_keyframe+empty_moov", str(path)], check=True)
    data = path.read_bytes()
    with pytest.raises(Mp4IndexError, match="fragmented"):
        read_index(lambda a, b: data[a:b], len(data), "frag.mp4")
