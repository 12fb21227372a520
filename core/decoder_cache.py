"""An LRU cache of open video decoders, one per process, with hit/miss/eviction counters in shared memory
so the benchmark can read them across DataLoader workers. Decoders are never shared across fork
(a decoder inherited from the parent is dropped, not used; cf. lerobot #2488)."""

import os
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .shared_counters import SharedCounters


class DecoderCache:
    """LRU of open decoders keyed by file, bounded to `capacity` per process.

    Args:
        capacity: decoders kept open per process (>= 1); the least recently used is evicted past it.

    Counters (`stats()`): hits, misses, evictions summed over the main process and every DataLoader
    worker, and `open`: each process's open decoders at its last cache access, summed (a worker that has
    exited still counts what it had open when it last decoded).
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"decoder cache capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.counters = SharedCounters(("hits", "misses", "evictions", "open"))
        self._pid = os.getpid()
        self._decoders: OrderedDict[Any, Any] = OrderedDict()

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_decoders"] = OrderedDict()  # open decoders never travel to another process
        return state

    def get(self, key: Any, opener: Callable[[], Any]) -> Any:
        """The decoder for `key`; on a miss, `opener()` opens it."""
        if os.getpid() != self._pid:  # forked: the parent's decoders are not ours to use
            self._pid, self._decoders = os.getpid(), OrderedDict()
        decoder = self._decoders.get(key)
        if decoder is not None:
            self._decoders.move_to_end(key)
            self.counters.add("hits")
            return decoder
        self.counters.add("misses")
        decoder = opener()
        self._decoders[key] = decoder
        self._evict()
        return decoder

    def resize(self, capacity: int) -> None:
        """Change the capacity (>= 1), evicting least recently used decoders past it."""
        if capacity < 1:
            raise ValueError(f"decoder cache capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._evict()

    def _evict(self) -> None:
        while len(self._decoders) > self.capacity:
            self._decoders.popitem(last=False)
            self.counters.add("evictions")
        self.counters.set("open", len(self._decoders))

    def clear(self) -> None:
        """Drop every open decoder of this process."""
        self._decoders.clear()
        self.counters.set("open", 0)

    def stats(self) -> dict[str, int]:
        """Counters summed over all processes: `{"hits", "misses", "evictions", "open", "capacity"}`."""
        return {**self.counters.total(), "capacity": self.capacity}

    def reset_stats(self) -> None:
        """Zero the counters (e.g. after warm-up)."""
        self.counters.reset(("hits", "misses", "evictions"))

