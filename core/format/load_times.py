"""Where opening a dataset spends its time, part by part: listing its folders, reading its metadata files, checking
episodes and rows, reading the video files' indexes. `dl run`'s result reports them (`listing_s`, `metadata_read_s`,
`checks_s`, `index_reads_s`) as the split of its "dataset built in"."""

import time
from contextlib import contextmanager, nullcontext

PARTS = ("listing", "metadata_read", "checks", "index_reads")
"""The parts, in the order opening a dataset goes through them; each is reported as the field `{part}_s`."""
READ_ONCE = ("listing", "metadata_read")
"""The parts done once per run where the metadata is read (`dl run`'s host), carried in the metadata snapshot."""


class LoadTimes:
    """Seconds spent in each of `PARTS` by this process (`READ_ONCE` parts: by the process that read the metadata,
    restored from its snapshot)."""

    def __init__(self, seconds: dict[str, float] | None = None):
        self.seconds = dict.fromkeys(PARTS, 0.0) | {k: float(v) for k, v in (seconds or {}).items() if k in PARTS}

    @contextmanager
    def part(self, name: str):
        """Add the wall time of the `with` block to part `name` (one of `PARTS`)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - t0

    def read_once(self) -> dict[str, float]:
        """The `READ_ONCE` parts' seconds, for the metadata snapshot."""
        return {k: self.seconds[k] for k in READ_ONCE}

    def fields(self) -> dict[str, float]:
        """`{"{part}_s": seconds rounded to ms}` for every part."""
        return {f"{k}_s": round(v, 3) for k, v in self.seconds.items()}


def timed(meta, name: str):
    """`meta.load_times.part(name)`, or a context that times nothing for a metadata object that keeps no times (a
    stand-in built by hand)."""
    times = getattr(meta, "load_times", None)
    return times.part(name) if times is not None else nullcontext()
