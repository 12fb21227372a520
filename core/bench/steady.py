"""Steady-state rates: what a loader delivers once start-up is over (imports, worker start, decoder opens, first
reads, page faults), over enough time to mean something, with how much it varied while measured.

A rate is events (samples) over the measured time, which starts after a warm-up; the measured time is cut into
blocks of equal length and each block's rate computed, and the spread of those block rates says how steady the
figure is. The warm-up matters: a run's first samples pay for reading the first episodes and opening their videos
(`benchmarks/results/internals.md`, "Steady state")."""

import time
from collections.abc import Callable

import numpy as np


def spread_pct(rates: list[float]) -> float | None:
    """How much block rates varied: the range of their middle 80% (10th to 90th percentile) over their median, in %;
    None with fewer than two blocks."""
    if len(rates) < 2:
        return None
    p10, median, p90 = np.percentile(rates, [10, 50, 90])
    return round(float(100 * (p90 - p10) / median), 1) if median > 0 else None


def block_rates(times: list[float], counts: list[int], start: float, end: float, block_s: float) -> list[float]:
    """Events per second in consecutive blocks of `block_s` seconds from `start`, of the events counted at
    `times` (`counts[i]` events at `times[i]`) up to `end`; a last block shorter than `block_s` is left out (all
    of [start, end] is one block when shorter than a block)."""
    blocks = max(int((end - start) // block_s), 1)
    width = (end - start) / blocks if blocks == 1 else block_s
    sums = np.zeros(blocks)
    for t, n in zip(times, counts, strict=True):
        k = int((t - start) // width)
        if 0 <= k < blocks:
            sums[k] += n
    return (sums / width).tolist() if width > 0 else []


class SteadyTimer:
    """Times events arriving one `tick()` at a time: the first `warmup_s` seconds (and at least the first tick)
    are warm-up, untimed; the tick that ends it starts the clock (`on_start()` is called then); from there every
    tick counts, until at least `seconds` have passed and `min_events` were counted, or `limit_s` since the first
    tick (then `tick()` returns True).

    Attributes:
        samples: events counted since the clock started.
        measured_s: seconds since the clock started, at the last tick.
        seconds: the measuring time asked for.
    """

    def __init__(self, warmup_s: float, seconds: float, min_events: int, limit_s: float, block_s: float = 0.5,
                 on_start: Callable[[], None] | None = None):
        self.warmup_s, self.seconds, self.min_events, self.limit_s = warmup_s, seconds, min_events, limit_s
        self.block_s, self.on_start = block_s, on_start
        self.samples, self.measured_s = 0, 0.0
        self._first: float | None = None
        self._start: float | None = None
        self._times: list[float] = []

    def tick(self, n: int = 1) -> bool:
        """`n` events arrived now; True once measuring is done."""
        now = time.perf_counter()
        if self._first is None:
            self._first = now
        if self._start is None:
            if now - self._first >= self.warmup_s or self.warmup_s <= 0:
                self._start = now
                if self.on_start is not None:
                    self.on_start()
            return False
        self.samples += n
        self.measured_s = now - self._start
        self._times.append(now)
        enough = self.measured_s >= self.seconds and self.samples >= self.min_events
        return enough or now - self._first >= self.limit_s

    def block_rates(self) -> list[float]:
        """Events per second in each `block_s` block of the measured time."""
        if self._start is None:
            return []
        return block_rates(self._times, [1] * len(self._times), self._start, self._start + self.measured_s,
                           self.block_s)
