"""How much of the machine's CPU other processes took while a run measured: the machine's busy CPU time (psutil's
system-wide counters) less the run's process tree's (workers included), per phase, with the load average. A shared
node (a neighbour's job, a cluster's other tenants) shows here, so a rate measured beside it is marked, not trusted
as the loader's."""

import os
import threading
import time
from dataclasses import dataclass

import psutil

BUSY_SHARE = 0.25
"""Other processes taking more than this share of the machine's cores during a phase mark the run busy."""


BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")
"""psutil.cpu_times() fields of time a core spent busy (Linux's guest times are already inside user and nice)."""


@dataclass(frozen=True)
class CpuCounters:
    """Cumulative counters at one moment: wall time (s), the machine's busy CPU time (s: every core's time not
    idle and not waiting for I/O) and the run's process tree's CPU time (s)."""

    wall_s: float
    machine_busy_s: float
    tree_s: float


def contention(start: CpuCounters, end: CpuCounters, cpu_count: int, load_1m: float | None = None) -> dict:
    """What the machine's cores did between two readings: `{"wall_s", "cores_used_by_run", "cores_used_by_others",
    "others_share" (of the machine's cores), "load_1m", "busy"}`; busy when others took more than `BUSY_SHARE` of
    the cores. A negative difference (counters read at slightly different moments) counts as 0."""
    wall = max(end.wall_s - start.wall_s, 1e-9)
    run = max(end.tree_s - start.tree_s, 0.0) / wall
    others = max(end.machine_busy_s - start.machine_busy_s - (end.tree_s - start.tree_s), 0.0) / wall
    share = others / cpu_count
    return {"wall_s": round(wall, 3), "cores_used_by_run": round(run, 2), "cores_used_by_others": round(others, 2),
            "others_share": round(share, 3), "load_1m": None if load_1m is None else round(load_1m, 2),
            "busy": share > BUSY_SHARE}


def busy_line(phases: dict, cpu_count: int) -> str | None:
    """One line saying the machine was busy in the phases marked so (`contention` per phase name), with the most
    cores others used; None when none was."""
    busy = {name: c for name, c in phases.items() if c.get("busy")}
    if not busy:
        return None
    worst = max(c["cores_used_by_others"] for c in busy.values())
    return (f"machine busy: other processes used up to {worst:g} of {cpu_count} cores ({', '.join(busy)}); rates "
            "measured then are low by about that share. Rerun on a quiet machine, or compare runs with --repeats.")


class ContentionMonitor:
    """Samples the machine's busy CPU time and the run's process tree's CPU time every `period_s` seconds on a
    daemon thread (a process that ended keeps its last reading), and records `contention` per phase: call `phase(
    name)` when one starts; `phases` holds each ended phase's figures. Use as a context manager around the run."""

    def __init__(self, period_s: float = 0.25, root: psutil.Process | None = None):
        self.period_s, self.root = period_s, root or psutil.Process()
        self.cpu_count = psutil.cpu_count() or 1
        self.phases: dict[str, dict] = {}
        self._seen: dict[int, float] = {}  # pid -> its last CPU time (s)
        self._current: tuple[str, CpuCounters] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dl-contention", daemon=True)

    def counters(self) -> CpuCounters:
        """The counters now."""
        times = psutil.cpu_times()
        busy = sum(getattr(times, f, 0.0) for f in BUSY_FIELDS)
        with self._lock:
            for process in [self.root, *self._children()]:
                try:
                    t = process.cpu_times()
                    self._seen[process.pid] = t.user + t.system
                except psutil.Error:
                    pass
            tree = sum(self._seen.values())
        return CpuCounters(time.perf_counter(), busy, tree)

    def _children(self) -> list:
        try:
            return self.root.children(recursive=True)
        except psutil.Error:
            return []

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.counters()

    def phase(self, name: str | None) -> None:
        """End the current phase (recording its figures) and start `name` (None: start none)."""
        now = self.counters()
        if self._current is not None:
            ended, start = self._current
            self.phases[ended] = contention(start, now, self.cpu_count, os.getloadavg()[0])
        self._current = (name, now) if name is not None else None

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.phase(None)
        self._stop.set()
        self._thread.join()
