"""Peak memory of a process tree (the benchmark process and its DataLoader workers), sampled by psutil."""

import threading

import psutil


def tree_rss_bytes(root: psutil.Process) -> int:
    """Sum of RSS (bytes) over `root` and all its descendants; processes that exit meanwhile count 0."""
    total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            pass
    return total


def tree_pss_bytes(root: psutil.Process) -> int:
    """Sum of PSS (bytes) over the tree: shared pages (memory maps, fork copy-on-write) counted once."""
    total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += proc.memory_full_info().pss
        except (psutil.Error, AttributeError):
            pass
    return total


class PeakRssMonitor:
    """Samples the tree's RSS every `period_s` seconds on a daemon thread; `peak_bytes` is the maximum
    seen. Use as a context manager around the measured work."""

    def __init__(self, period_s: float = 0.1, root: psutil.Process | None = None):
        self.period_s, self.root = period_s, root or psutil.Process()
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dl-rss-monitor", daemon=True)

    def _loop(self):
        while True:
            self.sample()
            if self._stop.wait(self.period_s):
                return

    def sample(self) -> int:
        """Take one sample now; returns it (bytes)."""
        rss = tree_rss_bytes(self.root)
        self.peak_bytes = max(self.peak_bytes, rss)
        return rss

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sample()
