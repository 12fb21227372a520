"""How an admitted byte range is cut into downloads, and in what order they go: its first bytes first.

A reader of an episode's range starts at its beginning (a decoder opens at the first keyframe, then reads on in
order), and a loader admits many episodes at once (the pool opens `episode_pool_size` of them and draws its first
batch from all of them). Downloading each range whole, in admission order, makes the first batch wait for every
open episode's whole range. So `dl.kits.remote.file_cache.PrefetchCache` cuts each range into pieces that grow
from `first_bytes` (doubling up to `max_bytes`) and downloads them shallowest first across every admitted range:
the first piece of each range (enough for a decoder to open it and decode its first frames), then the second of
each, and so on (ties in admission order). The growth keeps the requests per range few (a 2 MB range is 4
requests with the defaults). Generic: it knows nothing of videos or parquet files.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

FIRST_PIECE_BYTES = 128 << 10
"""The first piece of a range: a keyframe and the first frames of a 640x480 camera episode at real bitrates
(~6 KB a frame), plus the 64 KiB a decoder's I/O buffer reads past them."""
MAX_PIECE_BYTES = 4 << 20
"""The largest piece: past it, a request's latency is a small part of its transfer time."""


@dataclass(frozen=True)
class PieceOrder:
    """Where a range is cut (`first_bytes`, then doubling up to `max_bytes`) and each piece's depth (0 for the
    first piece of a range: downloaded first)."""

    first_bytes: int = FIRST_PIECE_BYTES
    max_bytes: int = MAX_PIECE_BYTES

    def __post_init__(self):
        if not 1 <= self.first_bytes <= self.max_bytes:
            raise ValueError(f"piece sizes must satisfy 1 <= first_bytes <= max_bytes, got {self}")

    def _bounds(self) -> Iterator[int]:
        """Offsets from a range's start where its pieces begin: 0, first, 3 x first, ... (ascending, endless)."""
        offset, size = 0, self.first_bytes
        while True:
            yield offset
            offset, size = offset + size, min(size * 2, self.max_bytes)

    def depth(self, offset: int) -> int:
        """The depth of the piece holding byte `offset` of a range (offsets before it: 0)."""
        for depth, bound in enumerate(self._bounds()):
            if bound > offset:
                return max(depth - 1, 0)
        raise AssertionError("unreachable: the bounds never end")

    def cut(self, start: int, gap: tuple[int, int], atomic: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
        """`(piece start, piece end, depth)` of the part `gap` of a range starting at `start`, cut at the range's
        piece bounds except inside an `atomic` range (one that must come in one request: an index whose digest
        is checked)."""
        lo, hi = gap
        cuts = []
        for bound in self._bounds():
            at = start + bound
            if at >= hi:
                break
            if at > lo and not any(a < at < b for a, b in atomic):
                cuts.append(at)
        edges = [lo, *cuts, hi]
        return [(a, b, self.depth(a - start)) for a, b in pairwise(edges)]
