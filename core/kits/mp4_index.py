"""The sample index of an MP4 video track, read from the file's `moov` box with a few ranged reads, so a
source can fetch the bytes of a time span of the video (an episode) instead of the whole file.

The container is ISO BMFF (ISO/IEC 14496-12): `moov/trak/mdia/minf/stbl` holds, per sample (one coded
frame) in decode order, its size (`stsz`/`stz2`), its chunk and the chunk's file offset (`stsc`,
`stco`/`co64`), its decode time (`stts`), its composition offset (`ctts`) and whether it is a keyframe
(`stss`; absent: every sample is one); `edts/elst` shifts the timeline. Presentation times follow FFmpeg's
`mov` demuxer (what torchcodec decodes with): pts = dts + composition offset - the edit's media time + any
leading empty edit. The top-level boxes are found by their headers, so `moov` may come before the media
data (`-movflags +faststart`) or after it (FFmpeg's default). Fragmented MP4s (`moof`), edit lists of more
than one edit and files with no video track raise `Mp4IndexError`: read such a file whole.

No library parses these tables into arrays (pymp4 builds a Python object per sample and lacks `ctts`
and `elst`), so dl does, with numpy: one `frombuffer` per table (`dl.kits.mp4_boxes`).
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .mp4_boxes import Mp4IndexError, box_header, size_field, track_index

HEAD_BYTES = 64 << 10
"""The first read of a file, and of each region a box header is looked for in: one request usually holds
`ftyp` and a faststart file's `moov`."""
MAX_TOP_BOXES = 4096
"""A file with more top-level boxes than this is refused (a corrupt size field would otherwise loop)."""
READ_AHEAD_BYTES = 64 << 10
"""What a reader fetches past the bytes it needs: torchcodec fills its 64 KiB I/O buffer from a file-like
object (reading on after a short read), so the first samples (FFmpeg's stream probe on open) and every
span's samples are followed by this many bytes (`benchmarks/results/internals.md`, "Remote byte ranges", says on
which codecs this was checked; a read that falls outside the ranges still succeeds, as a request of its own). The
built-in decoders read a remote video through a view that ends a fill at bytes not
downloaded yet (`dl.kits.remote.views.CachedView`'s `fills`), so they never wait for these bytes, which are
fetched with the span."""

Read = Callable[[int, int], bytes]
"""`read(start, end)`: bytes `[start, end)` of the file (one ranged request)."""


@dataclass(frozen=True)
class SampleIndex:
    """One video track's samples, in decode order.

    Attributes:
        offsets: int64 [N], each sample's byte offset in the file.
        sizes: int64 [N], each sample's size in bytes.
        pts: int64 [N], each sample's presentation time in `timescale` units (FFmpeg's, edit list applied).
        keyframes: bool [N], whether the sample is a keyframe (decoding may start there).
        timescale: units per second of `pts`.
        header: the byte ranges `[start, end)` a demuxer reads to open the file: every top-level box up to the
            media data's payload (with `ftyp` and a faststart `moov`), a trailing `moov`, and `READ_AHEAD_BYTES`
            from the first sample (read by FFmpeg's stream probe); merged, ascending.
        size: the file's size in bytes.
        moov: the `[start, end)` of the `moov` box (the index itself).
        codec: the sample entry's four-character code (e.g. "av01", "avc1", "hvc1", "mp4v").
    """

    offsets: np.ndarray
    sizes: np.ndarray
    pts: np.ndarray
    keyframes: np.ndarray
    timescale: int
    header: tuple[tuple[int, int], ...]
    size: int
    moov: tuple[int, int]
    codec: str

    @property
    def pts_s(self) -> np.ndarray:
        """float64 [N], presentation times in seconds."""
        return self.pts / self.timescale

    def decode_span(self, from_s: float, to_s: float) -> tuple[int, int, int, int]:
        """`decode_spans` of one span, as ints.

        Raises:
            Mp4IndexError: no frame falls in the span.
        """
        first, last, lo, hi, empty = self.decode_spans(np.array([from_s]), np.array([to_s]))
        if empty[0]:
            raise Mp4IndexError(f"no frame in [{from_s:.3f}, {to_s:.3f}) s: the track spans "
                                f"{self.pts_s.min():.3f}-{self.pts_s.max():.3f} s")
        return int(first[0]), int(last[0]), int(lo[0]), int(hi[0])

    def decode_spans(self, from_s: np.ndarray, to_s: np.ndarray) -> tuple[np.ndarray, ...]:
        """The samples to read for the frames shown in each span `[from_s[i], to_s[i])` seconds (episodes' spans;
        frames within half a frame of a bound count as inside, as timestamps are rounded): int64 [S] arrays
        `(first, last, shown_first, shown_last)`, inclusive decode-order indices: from the keyframe at or before the
        first shown frame to the last sample a decoder reads before it has output them all (the last shown one, plus
        the reorder depth of B-frames and a keyframe interval), and the decode-order range of the shown frames; and
        `empty`, bool [S]: no frame falls in the span (its other values are then meaningless). `byte_ranges` adds the
        reader's read-ahead. A shown frame's decode position is within `reorder_depth` of its presentation rank, so
        the first and last shown samples lie among the `2 x reorder_depth + 1` frames at each end of the span."""
        order, times = self._by_time
        a = np.searchsorted(times, np.asarray(from_s, np.float64) - self.half_frame_s, side="left")
        b = np.searchsorted(times, np.asarray(to_s, np.float64) - self.half_frame_s, side="left")
        empty = b <= a
        top = np.maximum(b - 1, a).clip(max=len(order) - 1)
        near = np.arange(2 * self.reorder_depth + 1)[:, None]
        lo = order[np.minimum(a[None, :] + near, top[None, :])].min(axis=0)
        hi = order[np.maximum(top[None, :] - near, a[None, :]).clip(max=len(order) - 1)].max(axis=0)
        last = np.minimum(hi + self.keyframe_interval + self.reorder_depth, len(order) - 1)
        return self._keyframe_at_or_before[lo], last, lo, hi, empty

    def frame_samples(self, first: int, last: int) -> tuple[int, int]:
        """The decode-order samples `(first, last)` (inclusive) a decoder reads to output the frames at positions
        `first..last` of the file's presentation order (those `dl.format.frame_times` lists: without the samples an
        edit list starts after): from the keyframe at or before the first of them in decode order to the last of
        them plus the reorder depth."""
        order = self._by_time[0]
        shown = order[min(first, last) + self.dropped:last + self.dropped + 1]
        if not len(shown):
            return len(order) - 1, len(order) - 1
        return (int(self._keyframe_at_or_before[shown.min()]),
                min(int(shown.max()) + self.reorder_depth, len(order) - 1))

    @cached_property
    def _by_time(self) -> tuple[np.ndarray, np.ndarray]:
        """(decode-order index of each sample in presentation order, int64 [N]; their times, float64 [N] s)."""
        order = np.argsort(self.pts, kind="stable")
        return order, self.pts_s[order]

    @cached_property
    def half_frame_s(self) -> float:
        """Half the median spacing of presentation times, in seconds (0.5 for a single frame)."""
        return 0.5 * float(np.median(np.diff(np.sort(self.pts)))) / self.timescale if len(self.pts) > 1 else 0.5

    @cached_property
    def dropped(self) -> int:
        """Samples shown before 0 s (FFmpeg's mov demuxer drops those an edit list starts after)."""
        return int((self.pts < 0).sum())

    @cached_property
    def _keyframe_at_or_before(self) -> np.ndarray:
        """int64 [N]: the last keyframe at or before each sample (0 where none is)."""
        return np.maximum.accumulate(np.where(self.keyframes, np.arange(len(self.keyframes)), 0))

    @cached_property
    def keyframe_interval(self) -> int:
        """The longest run of samples from one keyframe to the next (the GOP length)."""
        keys = np.flatnonzero(self.keyframes)
        return int(np.diff(np.append(keys, len(self.keyframes))).max()) if len(keys) else len(self.keyframes)

    @cached_property
    def reorder_depth(self) -> int:
        """How many samples past a frame a decoder may read before it outputs it: the largest gap between a
        sample's decode position and its presentation rank (0 without B-frames)."""
        rank = np.empty(len(self.pts), dtype=np.int64)
        rank[self._by_time[0]] = np.arange(len(self.pts))
        return int(max(0, (np.arange(len(self.pts)) - rank).max(), (rank - np.arange(len(self.pts))).max()))

    def byte_ranges(self, first, last, read_ahead: bool = True) -> list[tuple[int, int]]:
        """The bytes of the samples `first[i]..last[i]` (decode order, inclusive; ints or int arrays [S]) and, with
        `read_ahead`, the `READ_AHEAD_BYTES` after each run's last sample (within the file), as merged
        `[start, end)` ranges."""
        first, last = np.atleast_1d(first).astype(np.int64), np.atleast_1d(last).astype(np.int64)
        covered = np.zeros(len(self.offsets) + 1, dtype=np.int64)
        np.add.at(covered, first, 1)
        np.add.at(covered, last + 1, -1)
        held = np.cumsum(covered[:-1]) > 0
        starts = self.offsets[held]
        ranges = [np.stack([starts, starts + self.sizes[held]], axis=1)]
        if read_ahead:
            tail = self._end_so_far[last]
            ranges.append(np.stack([tail, np.minimum(self.size, tail + READ_AHEAD_BYTES)], axis=1))
        return merge_ranges(np.concatenate(ranges))

    @cached_property
    def _end_so_far(self) -> np.ndarray:
        """int64 [N]: the furthest byte any sample up to each one (decode order) ends at."""
        return np.maximum.accumulate(self.offsets + self.sizes)

    def bytes_of(self, first, last):
        """Bytes of samples `first..last` (inclusive; ints or int arrays)."""
        return self._bytes_before[np.asarray(last) + 1] - self._bytes_before[np.asarray(first)]

    @cached_property
    def _bytes_before(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.sizes)])


def merge_ranges(ranges, gap: int = 0) -> list[tuple[int, int]]:
    """`[start, end)` ranges (pairs, or an int array [R, 2]) sorted and merged where they overlap or are at most
    `gap` bytes apart; empty ones dropped."""
    spans = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
    spans = spans[spans[:, 1] > spans[:, 0]]
    if not len(spans):
        return []
    spans = spans[np.argsort(spans[:, 0], kind="stable")]
    ends = np.maximum.accumulate(spans[:, 1])
    opens = np.concatenate([[True], spans[1:, 0] > ends[:-1] + gap])
    closes = np.concatenate([opens[1:], [True]])
    return list(zip(spans[opens, 0].tolist(), ends[closes].tolist(), strict=True))


# ---------------------------------------------------------------------------------------------- reading
def read_index(read: Read, size: int, name: str = "video") -> SampleIndex:
    """Index the first video track of an MP4 of `size` bytes through ranged reads (usually 1 request for a
    faststart file, 2 when `moov` follows the media data).

    Args:
        read: `read(start, end)`, bytes of the file.
        size: the file's size in bytes.
        name: the file, for messages.

    Raises:
        Mp4IndexError: not an MP4 this module indexes (the message says why and names the file).
    """
    file = _Ranges(read, size, name)
    header: list[tuple[int, int]] = []
    moov = mdat = moov_at = None
    pos = 0
    for _ in range(MAX_TOP_BOXES):
        if pos >= size or (moov is not None and mdat is not None):
            break
        kind, start, end = file.box_at(pos)
        if kind == "moof":
            raise Mp4IndexError(f"{name} is a fragmented MP4 (moof boxes): read it whole")
        if kind == "moov":
            moov, moov_at = file.bytes(start, end), (pos, end)
            header.append(moov_at)
        elif kind == "mdat":
            mdat = (start, end)
            header.append((pos, start))
        elif mdat is None:  # ftyp, free, uuid... before the media data: read by the demuxer on its way
            header.append((pos, end))
        pos = end
    else:
        raise Mp4IndexError(f"{name} has more than {MAX_TOP_BOXES} top-level boxes: not a usable MP4")
    if moov is None:
        raise Mp4IndexError(f"{name} has no moov box (truncated, or not an MP4)")
    index = track_index(memoryview(moov), name)
    offsets, sizes = index["offsets"], index["sizes"]
    if len(offsets) and int((offsets + sizes).max()) > size:
        raise Mp4IndexError(f"{name}: samples extend past the file's {size} bytes (truncated)")
    probe = [(int(offsets[0]), min(size, int(offsets[0]) + READ_AHEAD_BYTES))] if len(offsets) else []
    return SampleIndex(offsets, sizes, index["pts"], index["keyframes"], index["timescale"],
                       tuple(merge_ranges(header + probe)), size, moov_at,
                       index["codec"])


class _Ranges:
    """The parts of the file read so far, read in `HEAD_BYTES` windows."""

    def __init__(self, read: Read, size: int, name: str):
        self.read, self.size, self.name = read, size, name
        self.windows: list[tuple[int, bytes]] = []

    def bytes(self, start: int, end: int) -> bytes:
        for base, data in self.windows:
            if base <= start and end <= base + len(data):
                return data[start - base:end - base]
        data = self.read(start, min(self.size, max(end, start + HEAD_BYTES)))
        if len(data) < end - start:
            raise Mp4IndexError(f"{self.name}: asked for bytes {start}-{end}, got {len(data)} (truncated?)")
        self.windows.append((start, data))
        return data[: end - start]

    def box_at(self, pos: int) -> tuple[str, int, int]:
        """(type, payload start, end) of the top-level box at `pos`."""
        head = self.bytes(pos, min(pos + 16, self.size))
        kind, start, end = box_header(head, 0, len(head), self.name)
        end = self.size if end == len(head) and size_field(head) == 0 else pos + end
        if end > self.size:
            raise Mp4IndexError(f"{self.name}: box {kind!r} at byte {pos} ends past the file's {self.size} bytes "
                                "(truncated)")
        return kind, pos + start, end
