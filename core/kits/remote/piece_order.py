"""How an admitted byte range is cut into downloads, and in what order they go: the bytes a reader needs first,
first.

A loader admits many episodes at once (the pool opens `episode_pool_size` of them and draws its first batch from
all of them), so downloading each range whole, in admission order, makes the first batch wait for every open
episode's whole range. `dl.kits.remote.file_cache.PrefetchCache` downloads the pieces of every admitted range
shallowest first. A piece's depth says how soon a reader needs it:

- A range admitted without reads is read from its start (a decoder opens at the first keyframe, then reads on in
  order): it is cut into pieces that grow from `first_bytes` (doubling up to `max_bytes`), of depth 0, 1, 2, ...
  So the first piece of each range (enough for a decoder to open it and decode its first frames) comes before the
  second of any. The growth keeps the requests per range few (a 2 MB range is 4 requests with the defaults).
- A range admitted with `Ranked` reads (the loader says which bytes it reads in which order, e.g. the pool's
  chunks of frames, opened in an order drawn at admission) takes each byte's depth from the lowest rank of a read
  covering it: the first reads (rank 0) come as placed, later bytes in pieces of about `rest_bytes` (fewer
  requests), each at the lowest rank it holds.

Ties go in admission order. A download thread joins the pieces queued right after the one it takes in the same
file, up to `COALESCE_BYTES` in one request (the cache's `coalesce_bytes`; after a depth-0 piece, only depth-0
ones): fewer requests, each a round trip and a server's work. Generic: it knows nothing of videos or parquet files.
"""

import math
from dataclasses import dataclass
from itertools import groupby, pairwise
from typing import NamedTuple

FIRST_PIECE_BYTES = 128 << 10
"""The first piece of a range: a keyframe and the first frames of a 640x480 camera episode at real bitrates
(~6 KB a frame), plus the 64 KiB a decoder's I/O buffer reads past them."""
MAX_PIECE_BYTES = 4 << 20
"""The largest piece: past it, a request's latency is a small part of its transfer time."""
REST_PIECE_BYTES = 96 << 10
"""About the size of the pieces that bytes read after the first reads (rank 1 and later, or no read) come in:
about one `pool` chunk of a camera at real bitrates (16 frames of ~6 KB), so a piece holds little beyond the
chunk it is fetched for (`benchmarks/results/internals.md`, "Remote byte ranges", compares piece sizes)."""

COALESCE_BYTES = 384 << 10
"""The most bytes of one download that joins queued pieces following one another in a file (four of
`REST_PIECE_BYTES`): fewer requests cost the client and the server less CPU; joins of 1 MiB gave no more
(`benchmarks/results/internals.md`, "Remote byte ranges")."""

CALM_COALESCE_BYTES = 1 << 20
"""The most bytes one download joins while readers are not waiting for the network (no reader has waited for `CALM_S`):
the downloads are then ahead of the readers, and fewer, larger requests cost the client and the server less CPU and
fewer round trips. While readers wait, a long joint download would hold their pieces back behind deeper bytes, so
joins stay at `COALESCE_BYTES` (`benchmarks/results/remote.md`, the set on 58cba7f)."""
CALM_S = 1.0
"""Seconds without a reader waiting for the network after which downloads join up to `CALM_COALESCE_BYTES`."""


class Ranked(NamedTuple):
    """Bytes `[start, end)` of the file `rel` that a reader reads at `rank` (0: first, then 1, ...)."""

    rel: str
    start: int
    end: int
    rank: int


Zone = tuple[int, int, int]
"""`(start, end, depth)`: bytes of a range that download at one depth."""


@dataclass(frozen=True)
class PieceOrder:
    """Where a range is cut (`first_bytes`, then doubling up to `max_bytes`; bytes after a loader's first reads
    in pieces of about `rest_bytes`) and each piece's depth (0: downloaded first)."""

    first_bytes: int = FIRST_PIECE_BYTES
    max_bytes: int = MAX_PIECE_BYTES
    rest_bytes: int = REST_PIECE_BYTES

    def __post_init__(self):
        if not 1 <= self.first_bytes <= self.max_bytes or self.rest_bytes < 1:
            raise ValueError(f"piece sizes must satisfy 1 <= first_bytes <= max_bytes and rest_bytes >= 1, got "
                             f"{self}")

    def _grown(self, start: int, end: int) -> list[tuple[int, int]]:
        """`[start, end)` cut into pieces growing from `first_bytes` at `start`, doubling up to `max_bytes`."""
        out, at, size = [], start, self.first_bytes
        while at < end:
            out.append((at, min(at + size, end)))
            at, size = at + size, min(size * 2, self.max_bytes)
        return out

    def zones(self, start: int, end: int, reads: list[Ranked] = ()) -> list[Zone]:
        """The zones tiling the range `[start, end)`, ascending. Without `reads` (reads of this range's file):
        its growing pieces at depths 0, 1, 2, .... With them, each byte is at the lowest rank of a read covering
        it (one past the highest rank where none does); bytes of rank 0 come in zones cut as pieces grow from
        each zone's start, and each run of later bytes in pieces of about `rest_bytes`, each at the lowest rank
        it holds."""
        if not reads:
            return [(a, b, depth) for depth, (a, b) in enumerate(self._grown(start, end))]
        edges = sorted({start, end, *(min(max(x, start), end) for r in reads for x in (r.start, r.end))})
        after = max(r.rank for r in reads) + 1
        fine: list[list[int]] = []
        for a, b in pairwise(edges):
            depth = min((r.rank for r in reads if r.start <= a and b <= r.end), default=after)
            if fine and fine[-1][2] == depth:
                fine[-1][1] = b
            else:
                fine.append([a, b, depth])
        out: list[Zone] = []
        for first, run in groupby(fine, key=lambda zone: zone[2] == 0):
            run = list(run)
            if first:
                out += [(x, y, 0) for a, b, _ in run for x, y in self._grown(a, b)]
                continue
            lo, hi = run[0][0], run[-1][1]
            pieces = math.ceil((hi - lo) / self.rest_bytes)
            bounds = [lo + (hi - lo) * i // pieces for i in range(pieces)] + [hi]
            out += [(a, b, self.depth([tuple(z) for z in run], a, b)) for a, b in pairwise(bounds)]
        return out

    @staticmethod
    def depth(zones: list[Zone], start: int, end: int) -> int:
        """The shallowest depth of the zones overlapping `[start, end)` (0 when none does)."""
        return min((d for a, b, d in zones if a < end and start < b), default=0)

    def cut(self, zones: list[Zone], gap: tuple[int, int], atomic: list[tuple[int, int]],
            held: list[tuple[int, int]] = ()) -> list[Zone]:
        """`(piece start, piece end, depth)` of the part `gap` of a range tiled by `zones`, cut at the zones'
        bounds and at those of the `held` ranges (files another process holds: a piece inside one is linked, not
        copied), except inside an `atomic` range (one that must come in one request: an index whose digest is
        checked); a piece spanning several zones takes the shallowest depth."""
        lo, hi = gap
        bounds = {a for a, _, _ in zones} | {x for span in held for x in span}
        cuts = sorted(a for a in bounds if lo < a < hi and not any(x < a < y for x, y in atomic))
        return [(a, b, self.depth(zones, a, b)) for a, b in pairwise([lo, *cuts, hi])]
