"""Where a loader's reads of a video span fall in the span's bytes, placed from their times alone.

A span's `dl.kits.remote.file_plan.Part` keeps its byte ranges (its frames from the keyframe at or before the
first, in decode order, plus the decoder's read-ahead), not each frame's offset: the frame tables of a million
episodes would not fit in every worker. So a read of the frames between two times is placed by
proportion (a camera episode's frames are about the same size: a constant frame rate and GOP, as LeRobot
records), widened by `MARGIN_BYTES` on both sides (the keyframe before its first frame, the estimate's error)
and by the decoder's read-ahead (`dl.kits.mp4_index.READ_AHEAD_BYTES`) past its end. A misplaced read costs
time, never data: ranks only order downloads, and every byte of the span is fetched either way.
"""

from ..mp4_index import READ_AHEAD_BYTES
from .piece_order import Ranked

MARGIN_BYTES = 32 << 10
"""Bytes a placed read is widened by at each end: ~5 frames of a 640x480 camera at real bitrates (~6 KB a
frame), a GOP-2 keyframe before the first frame and the proportion's error."""


def ranked_reads(rel: str, ranges: tuple[tuple[int, int], ...], from_s: float, to_s: float,
                 reads: tuple[tuple[float, float, int], ...]) -> list[Ranked]:
    """The byte ranges of `rel` that the reads `(start, end, rank)` (frames shown in `[start, end)` seconds) of
    the span `[from_s, to_s)` need, placed by proportion in the span's `ranges` (`[start, end)`, ascending): a
    read from the span's start begins at its first byte, one to its end runs to its last."""
    total = sum(b - a for a, b in ranges)
    frames = max(total - READ_AHEAD_BYTES, 1)
    length = to_s - from_s

    def at(t: float) -> float:
        return frames * min(max((t - from_s) / length, 0.0), 1.0) if length > 0 else 0.0

    out = []
    for start, end, rank in reads:
        lo = 0 if start <= from_s else at(start) - MARGIN_BYTES
        hi = total if end >= to_s else at(end) + READ_AHEAD_BYTES + MARGIN_BYTES
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
