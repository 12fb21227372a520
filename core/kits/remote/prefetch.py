"""Which blocks an admitted episode needs and in which order (`block_runs`), and the threads of one process that
download them (`Prefetcher`). A loader admits many episodes at once, so each block gets a depth and the threads take
the shallowest first, ties in admission order: where the loader says in which order it reads a video span
(`FileSpan.reads`, as the exact bytes of their frames: `dl.kits.remote.plans.FilePlans.ranked`), a block's depth is
the lowest rank of a read in it (blocks no read falls in last); else depths grow along a range (its first block at 0,
the next 2 at 1, the next 4 at 2...), so the first block of every range comes before the second of any. Adjacent
blocks of one file at one depth go in one download of at most `RUN_BLOCKS` blocks (each request costs a round trip
and a server's work).
"""

import heapq
import itertools
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import NamedTuple

from ..mp4_index import merge_ranges

RUN_BLOCKS = 8
"""The most blocks one download carries (1 MiB of `dl.kits.remote.host_cache.BLOCK_BYTES`)."""


class Piece(NamedTuple):
    """Bytes `[start, end)` of the file `rel`."""

    rel: str
    start: int
    end: int


class Ranked(NamedTuple):
    """Bytes `[start, end)` of the file `rel` that a reader reads at `rank` (0: first, then 1, ...)."""

    rel: str
    start: int
    end: int
    rank: int


class Run(NamedTuple):
    """Blocks `first..last` of the file `rel`, downloaded at `depth` (0: first)."""

    depth: int
    rel: str
    first: int
    last: int


def block_runs(pieces: list[Piece], reads: list[Ranked], block_bytes: int) -> list[Run]:
    """The downloads of the blocks holding `pieces` (joined where they overlap or meet), each block at its depth
    (above), ascending in each file."""
    depth: dict[tuple[str, int], int] = {}
    for rel in sorted({p.rel for p in pieces}):
        mine = [r for r in reads if r.rel == rel]
        after = max((r.rank for r in mine), default=-1) + 1
        for start, end in merge_ranges([(p.start, p.end) for p in pieces if p.rel == rel]):
            first = start // block_bytes
            for n in range(first, (end - 1) // block_bytes + 1):
                lo, hi = n * block_bytes, (n + 1) * block_bytes
                d = (min((r.rank for r in mine if r.start < hi and lo < r.end), default=after) if mine
                     else (n - first + 1).bit_length() - 1)
                depth[rel, n] = min(d, depth.get((rel, n), d))
    runs: list[Run] = []
    for (rel, n), d in sorted(depth.items()):
        last = runs[-1] if runs else None
        if last and (last.rel, last.last + 1, last.depth) == (rel, n, d) and n - last.first < RUN_BLOCKS:
            runs[-1] = last._replace(last=n)
        else:
            runs.append(Run(d, rel, n, n))
    return runs


class Prefetcher:
    """`threads` download threads of one process (started on the first task), taking tasks shallowest first, ties in
    the order they came. A task is a function of no arguments (a download); one that fails is dropped: a reader that
    needs its bytes fetches them itself, and gets the error there."""

    def __init__(self, threads: int):
        self.threads = max(1, int(threads))
        self._queue: list[tuple[int, int, object, Callable[[], None]]] = []
        self._numbers = itertools.count()
        self._cond = threading.Condition()
        self._workers: list[threading.Thread] = []

    def submit(self, key: object, depth: int, task: Callable[[], None]) -> None:
        with self._cond:
            heapq.heappush(self._queue, (depth, next(self._numbers), key, task))
            while len(self._workers) < self.threads:
                worker = threading.Thread(target=self._work, name=f"dl-prefetch-{len(self._workers)}", daemon=True)
                worker.start()
                self._workers.append(worker)
            self._cond.notify()

    def cancel(self, key: object) -> None:
        """Drop `key`'s tasks not started (those running finish)."""
        with self._cond:
            self._queue = [item for item in self._queue if item[2] != key]
            heapq.heapify(self._queue)

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue)
                _, _, _, task = heapq.heappop(self._queue)
            with suppress(Exception):  # a reader of these bytes fetches them again itself, and gets the error
                task()
