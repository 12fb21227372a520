"""Where a loader's reads of a video span fall in the span's bytes, placed from their times. A span's
`dl.kits.remote.file_plan.Part` keeps its byte ranges and at most `MAX_MARKS` keyframes (`keyframe_marks`: time and
offset in the span's bytes), not each frame's offset. A read is placed from the last mark at or before its start
(where the decoder starts) to the first mark after its end (without B-frames, a frame shown before a keyframe comes
before it in the file); a span without marks (B-frames) by proportion, widened by `MARGIN_BYTES`. A read is placed
without the decoder's read-ahead (`dl.kits.remote.views.CachedView`'s `fills`). A misplaced read costs time, never
data: ranks only order downloads.
"""

from typing import NamedTuple

import numpy as np

from ..mp4_index import READ_AHEAD_BYTES, SampleIndex


class Ranked(NamedTuple):
    """Bytes `[start, end)` of the file `rel` that a reader reads at `rank` (0: first, then 1, ...)."""

    rel: str
    start: int
    end: int
    rank: int


MARGIN_BYTES = 32 << 10
"""Bytes a read placed by proportion is widened by at each end: ~5 frames of a 640x480 camera (~6 KB a frame)."""
MAX_MARKS = 32
"""The most keyframes a span keeps (evenly chosen): 256 bytes a span, 256 MB for a million episodes."""
MARK = np.dtype([("t", "<f4"), ("at", "<i4")])
"""A mark: seconds from the span's start (float32), offset into the span's bytes (int32)."""
TIME_SLACK_S = 1e-3
"""A keyframe within this many seconds after a read's start counts as at its start (timestamps are rounded)."""


def keyframe_marks(index: SampleIndex, first: int, last: int, ranges: tuple[tuple[int, int], ...],
                   from_s: float) -> bytes:
    """The marks of the samples `first..last` (decode order) of a span starting at `from_s` seconds whose bytes are
    `ranges`: each kept keyframe's `(seconds from from_s, offset into the concatenated ranges)` as `MARK` records
    (at most `MAX_MARKS`, the first keyframe always among them); b"" for a track with B-frames (a frame shown before
    a keyframe may follow it in the file) or an offset past int32."""
    keys = first + np.flatnonzero(index.keyframes[first:last + 1])
    if index.reorder_depth or not len(keys):
        return b""
    keys = keys[np.unique(np.linspace(0, len(keys) - 1, min(len(keys), MAX_MARKS)).round().astype(np.int64))]
    starts = np.array([a for a, _ in ranges], dtype=np.int64)
    before = np.concatenate([[0], np.cumsum([b - a for a, b in ranges])])
    offsets = index.offsets[keys]
    where = np.searchsorted(starts, offsets, side="right") - 1
    at = before[where] + offsets - starts[where]
    if at.max() >= 2**31:
        return b""
    marks = np.empty(len(keys), dtype=MARK)
    marks["t"], marks["at"] = index.pts_s[keys] - from_s, at
    return marks.tobytes()


def ranked_reads(rel: str, ranges: tuple[tuple[int, int], ...], from_s: float, to_s: float,
                 reads: tuple[tuple[float, float, int], ...], marks: bytes = b"") -> list[Ranked]:
    """The byte ranges of `rel` that the reads `(start, end, rank)` (frames shown in `[start, end)` seconds) of
    the span `[from_s, to_s)` need, placed in the span's `ranges` (`[start, end)`, ascending) by its `marks`
    (`keyframe_marks`) or, without them, by proportion: a read from the span's start begins at its first byte, one
    to its end runs to its last."""
    total = sum(b - a for a, b in ranges)
    frames = max(total - READ_AHEAD_BYTES, 1)
    length = to_s - from_s
    keys = np.frombuffer(marks, dtype=MARK)

    def at(t: float) -> float:
        return frames * min(max((t - from_s) / length, 0.0), 1.0) if length > 0 else 0.0

    def start_of(t: float) -> float:
        if not len(keys):
            return at(t) - MARGIN_BYTES
        i = int(np.searchsorted(keys["t"], t - from_s + TIME_SLACK_S, side="right")) - 1
        return int(keys["at"][i]) if i >= 0 else 0

    def end_of(t: float) -> float:
        if not len(keys):
            return at(t) + MARGIN_BYTES
        i = int(np.searchsorted(keys["t"], t - from_s - TIME_SLACK_S, side="left"))
        return int(keys["at"][i]) if i < len(keys) else total

    out = []
    for start, end, rank in reads:
        lo = 0 if start <= from_s else start_of(start)
        hi = total if end >= to_s else end_of(end)
        out += [Ranked(rel, a, b, int(rank)) for a, b in _in_file(ranges, int(lo), int(hi))]
    return out


def _in_file(ranges: tuple[tuple[int, int], ...], lo: int, hi: int) -> list[tuple[int, int]]:
    """Offsets `[lo, hi)` into the concatenation of `ranges`, as `[start, end)` ranges of the file."""
    out, seen = [], 0
    for a, b in ranges:
        x, y = max(lo - seen, 0), min(hi - seen, b - a)
        if x < y:
            out.append((a + x, a + y))
        seen += b - a
    return out
