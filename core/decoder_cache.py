"""An LRU cache of open video decoders, one per process, with hit/miss/eviction counters in shared memory
so the benchmark can read them across DataLoader workers. Decoders are never shared across fork
(a decoder inherited from the parent is dropped, not used; cf. lerobot #2488)."""

import os
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
import torch.utils.data

MAX_SLOTS = 257  # slot 0: the main process; slot 1 + worker id: DataLoader workers
COUNTERS = ("hits", "misses", "evictions", "open")


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
        self.counters = torch.zeros((MAX_SLOTS, len(COUNTERS)), dtype=torch.int64).share_memory_()
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
        row = self.counters[_slot()]
        decoder = self._decoders.get(key)
        if decoder is not None:
            self._decoders.move_to_end(key)
            row[0] += 1
            return decoder
        row[1] += 1
        decoder = opener()
        self._decoders[key] = decoder
        if len(self._decoders) > self.capacity:
            self._decoders.popitem(last=False)
            row[2] += 1
        row[3] = len(self._decoders)
        return decoder

    def clear(self) -> None:
        """Drop every open decoder of this process."""
        self._decoders.clear()
        self.counters[_slot(), 3] = 0

    def stats(self) -> dict[str, int]:
        """Counters summed over all processes: `{"hits", "misses", "evictions", "open", "capacity"}`."""
        total = self.counters.sum(0).tolist()
        return {**dict(zip(COUNTERS, total, strict=True)), "capacity": self.capacity}

    def reset_stats(self) -> None:
        """Zero the counters (e.g. after warm-up)."""
        self.counters[:, :3] = 0


def _slot() -> int:
    info = torch.utils.data.get_worker_info()
    return 0 if info is None else 1 + info.id % (MAX_SLOTS - 1)
