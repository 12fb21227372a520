"""Byte ranges of files, each file's sorted and never overlapping: which ranges a cache holds, what a new range
overlaps and what it still lacks (`dl.kits.remote.file_cache.PrefetchCache` keeps one)."""

import bisect
from typing import NamedTuple


class Piece(NamedTuple):
    """Bytes `[start, end)` of the file `rel`."""

    rel: str
    start: int
    end: int


class FileRanges:
    """Non-overlapping `Piece`s per file, sorted; the caller never adds one overlapping another."""

    def __init__(self):
        self._by_file: dict[str, list[Piece]] = {}

    def add(self, piece: Piece) -> None:
        bisect.insort(self._by_file.setdefault(piece.rel, []), piece)

    def remove(self, piece: Piece) -> None:
        self._by_file[piece.rel].remove(piece)

    def holds(self, rel: str) -> bool:
        """Whether any range of `rel` is here."""
        return bool(self._by_file.get(rel))

    def overlapping(self, piece: Piece) -> list[Piece]:
        """The ranges of `piece.rel` overlapping `piece`, ascending."""
        pieces = self._by_file.get(piece.rel, [])
        i = bisect.bisect_right(pieces, Piece(piece.rel, piece.start, piece.start)) - 1
        out = []
        for p in pieces[max(i, 0):]:
            if p.start >= piece.end:
                break
            if p.end > piece.start:
                out.append(p)
        return out

    def gaps(self, piece: Piece) -> list[Piece]:
        """The parts of `piece` no range here covers, ascending."""
        out, pos = [], piece.start
        for p in self.overlapping(piece):
            if p.start > pos:
                out.append(Piece(piece.rel, pos, p.start))
            pos = max(pos, p.end)
        if pos < piece.end:
            out.append(Piece(piece.rel, pos, piece.end))
        return out


def merged(pieces: list[Piece]) -> list[Piece]:
    """Pieces of one file that overlap or meet, merged; sorted."""
    out: list[Piece] = []
    for piece in sorted(p for p in pieces if p.end > p.start):
        if out and out[-1].rel == piece.rel and piece.start <= out[-1].end:
            out[-1] = Piece(piece.rel, out[-1].start, max(out[-1].end, piece.end))
        else:
            out.append(piece)
    return out
