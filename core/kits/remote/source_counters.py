"""What a `dl.kits.remote.source.RemoteSource` counts (requests, bytes, retries, cache hits, waits), summed over
the main process and its DataLoader workers, and how `dl run` reports it (`source_stats`)."""

import threading

from ...dataloader.shared_counters import SharedCounters
from ..process_local import ProcessLocal

COUNTERS = ("requests", "bytes_fetched", "retries", "throttled_429", "server_errors", "failures", "cache_hits",
            "remote_reads", "ranges_prefetched", "bytes_prefetched", "bytes_needed", "network_wait_us")
STATS_MERGE = dict.fromkeys(COUNTERS, "sum") | {"read_amplification": "mean", "network_wait_s": "max",
                                                "metadata_s": "max"}
"""How each figure of `SourceCounters.report` combines over ranks (`dl.ReportsStats.stats_merge`)."""


class SourceCounters:
    """`COUNTERS` in shared memory (`dl.dataloader.shared_counters.SharedCounters`: a slot per process), counted
    under a lock of each process's own (`dl.kits.process_local`), since its download threads and readers count at
    once."""

    def __init__(self):
        self.shared = SharedCounters(COUNTERS)
        self._lock = ProcessLocal(threading.Lock)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock.get():
            self.shared.add(name, n)

    def reset(self) -> None:
        self.shared.reset()

    def report(self, metadata_s: float) -> dict:
        """The counters summed over this process and its DataLoader workers since the last reset:
        `requests`, `bytes_fetched`, `retries` (of which `throttled_429` and `server_errors`), `failures`
        (requests given up), `cache_hits` / `remote_reads` (blocks read from this host's cache / reads sent to the
        store without it), `ranges_prefetched` and `bytes_prefetched` (downloads into the cache and their bytes),
        `bytes_needed` (what the admitted episodes' frames and rows occupy), `read_amplification` (fetched /
        needed), `network_wait_s` (seconds readers blocked on the network, summed over processes) and `metadata_s`
        (given: listing, metadata and file indexes, on the host)."""
        totals = self.shared.total()
        wait = totals.pop("network_wait_us") / 1e6
        needed = totals["bytes_needed"]
        amplification = round(totals["bytes_fetched"] / needed, 3) if needed else None
        return {**totals, "read_amplification": amplification, "network_wait_s": round(wait, 3),
                "metadata_s": round(metadata_s, 3)}
