"""An LRU cache of open video decoders, one per process, bounded in count and in bytes, with hit/miss/eviction
counters in shared memory so the benchmark can read them across DataLoader workers. Decoders are never shared
across fork (each process opens its own: `dl.kits.process_local`; a decoder inherited from the parent is never used,
cf. lerobot #2488) nor pickled (a spawned worker starts empty)."""

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ...dataloader.shared_counters import SharedCounters
from ..process_local import ProcessLocal


class DecoderCache:
    """LRU of open decoders keyed by file, bounded to `capacity` decoders and `max_bytes` per process.

    Args:
        capacity: decoders kept open per process (>= 1); the least recently used is evicted past it.
        max_bytes: the most bytes the open decoders of one process may hold, as `size_of` estimates them (None:
            no byte bound). The decoder just opened is always kept, even when it alone is larger.
        size_of: estimates an open decoder's memory in bytes (its frame buffers); None counts 0.

    Counters (`stats()`): hits, misses, evictions summed over the main process and every DataLoader
    worker, and `open` / `bytes`: each process's open decoders and their estimated bytes at its last cache
    access, summed (a worker that has exited still counts what it had open when it last decoded).
    """

    def __init__(self, capacity: int, max_bytes: int | None = None, size_of: Callable[[Any], int] | None = None):
        if capacity < 1:
            raise ValueError(f"decoder cache capacity must be >= 1, got {capacity}")
        if max_bytes is not None and max_bytes < 0:
            raise ValueError(f"decoder cache max_bytes must be >= 0 or None, got {max_bytes}")
        self.capacity, self.max_bytes, self.size_of = capacity, max_bytes, size_of
        self.counters = SharedCounters(("hits", "misses", "evictions", "open", "bytes"))
        self._open: ProcessLocal[OrderedDict] = ProcessLocal(OrderedDict)  # key -> (decoder, estimated bytes)

    def get(self, key: Any, opener: Callable[[], Any]) -> Any:
        """The decoder for `key`; on a miss, `opener()` opens it."""
        opened = self._open.get()
        entry = opened.get(key)
        if entry is not None:
            opened.move_to_end(key)
            self.counters.add("hits")
            return entry[0]
        self.counters.add("misses")
        decoder = opener()
        opened[key] = decoder, int(self.size_of(decoder)) if self.size_of else 0
        self._evict()
        return decoder

    def resize(self, capacity: int) -> None:
        """Change the capacity (>= 1), evicting least recently used decoders past it."""
        if capacity < 1:
            raise ValueError(f"decoder cache capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._evict()

    def open_decoders(self) -> dict:
        """This process's open decoders by key, least recently used first (a copy)."""
        return {key: decoder for key, (decoder, _) in self._open.get().items()}

    @property
    def bytes(self) -> int:
        """Estimated bytes held by this process's open decoders."""
        return sum(size for _, size in self._open.get().values())

    def _evict(self) -> None:
        opened, held = self._open.get(), self.bytes
        while len(opened) > self.capacity or (self.max_bytes is not None and held > self.max_bytes and len(opened) > 1):
            _, (_, size) = opened.popitem(last=False)
            held -= size
            self.counters.add("evictions")
        self.counters.set("open", len(opened))
        self.counters.set("bytes", held)

    def discard(self, key: Any) -> None:
        """Drop `key`'s decoder in this process, if open: one that failed to decode is not used again (FFmpeg's
        state after an error on a corrupt payload is not safe to reuse; the next request opens the file afresh)."""
        opened = self._open.here()
        if opened is not None and opened.pop(key, None) is not None:
            self.counters.set("open", len(opened))
            self.counters.set("bytes", self.bytes)

    def clear(self) -> None:
        """Drop every open decoder of this process."""
        self._open.get().clear()
        self.counters.set("open", 0)
        self.counters.set("bytes", 0)

    def stats(self) -> dict[str, int | None]:
        """Counters summed over all processes: `{"hits", "misses", "evictions", "open", "bytes", "capacity",
        "max_bytes"}`."""
        return {**self.counters.total(), "capacity": self.capacity, "max_bytes": self.max_bytes}

    def reset_stats(self) -> None:
        """Zero the counters (e.g. after warm-up)."""
        self.counters.reset(("hits", "misses", "evictions"))
