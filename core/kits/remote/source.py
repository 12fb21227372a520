"""`RemoteSource`: a `dl.kits.remote.store.RemoteStore` (every request retried, counted and checked) that reads episodes
as byte ranges through this host's block cache; the `hub` and `bucket` plugins build one. One byte's way, in the
order of this module (docs/plugins.md draws it): `prepare` (the host: each file's index: `dl.kits.remote.plans`),
`admit` (the reading process: its spans' byte ranges from the index, block downloads, first reads first, queued on
its download threads: `dl.kits.remote.prefetch`), `_fetch_blocks` (a download thread: each block's lock in the host's
cache folder, `dl.kits.remote.host_cache`, then one ranged request for the blocks no one has), `block_path` (the
decoder's reads, through `dl.kits.remote.views.CachedView`). Index bytes are checked when a download holds them
whole: a file changed since it was indexed fails naming it. Without prefetch every read is a ranged request.
"""

import hashlib
import io
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import filelock

from ...contracts.errors import DlError
from ...contracts.source import FileSpan
from ..process_local import ProcessLocal
from ..video_indexes import indexes_of
from .file_plan import digest
from .host_cache import BLOCK_BYTES, HostCache, host_folder
from .plans import FilePlans
from .prefetch import Prefetcher, block_runs
from .retry import RemoteReadError, RetryPolicy
from .store import RemoteStore
from .views import CachedView

if TYPE_CHECKING:
    import fsspec


@dataclass(frozen=True)
class RemoteOptions:
    """A remote source's options, as `dl.plugins.remote.bucket.bucket_source` documents them (checked by
    `dl.plugins.remote.options.remote_options`); `retry`: every request's policy."""

    prefetch: bool = True
    cache_bytes: int = 8_000_000_000
    cache_dir: str | None = None
    prefetch_threads: int = 4
    block_size: int = 1 << 20
    retry: RetryPolicy = field(default_factory=RetryPolicy)


class RemoteSource(RemoteStore):
    """A `RemoteStore` (its `fs`, `root`, `name`, `meta`, `pinned`) read through byte-range plans and the host's
    block cache, as `options` (`RemoteOptions`) say; `dl.contracts.source.Prefetches`. Reads raise as the store's,
    and `RemoteReadError` for a file that changed since it was indexed."""

    def __init__(self, fs: "fsspec.AbstractFileSystem", root: str, name: str, *, options: RemoteOptions | None = None,
                 meta: "tuple[fsspec.AbstractFileSystem, str] | None" = None, pinned: dict | None = None):
        self.options = options or RemoteOptions()
        super().__init__(fs, root, name, meta=meta, retry=self.options.retry, pinned=pinned)
        self.plans = FilePlans()  # indexed files
        self.cache_folder = host_folder(self.options.cache_dir)
        self._local = ProcessLocal(partial(_Local, self.cache_folder, self.options.cache_bytes,
                                           self.options.prefetch_threads))
        self._names: dict[str, str] = {}  # the cache's name of each file read

    def _here(self) -> "_Local":
        """This process's cache handle and download threads (made anew in each process: threads and locks stay in
        theirs)."""
        return self._local.get()

    def _name(self, rel: str) -> str:
        """The cache's name of `rel`'s listed version: a digest of the dataset's URL, the file and its facts."""
        name = self._names.get(rel)
        if name is None:
            facts = self._facts[rel] = self.fingerprint(rel)
            name = self._names[rel] = hashlib.sha1(f"{self.url}\n{rel}\n{facts}".encode()).hexdigest()[:24]
        return name

    def open(self, rel: str) -> BinaryIO:
        """A seekable file over `rel`, read through the cache (`CachedView`)."""
        view = CachedView(self, rel, self._size(rel))  # also raises SourceFileNotFoundError for a missing file
        return io.BufferedReader(view, 64 << 10 if self.options.prefetch else self.options.block_size)

    def read_bytes(self, rel: str, start: int | None = None, end: int | None = None) -> bytes:
        """Bytes `[start, end)` of `rel` in one request (metadata: read once per run, never cached)."""
        t0 = time.perf_counter()
        try:
            return self._fetch(rel, start, end)
        finally:
            waited = time.perf_counter() - t0
            self.counters.add("network_wait_us", int(waited * 1e6))
            if rel.startswith("meta/"):
                self.metadata_s += waited

    def video_input(self, rel: str) -> BinaryIO:
        """An unbuffered `CachedView` of `rel` (a decoder that reads on after a short read may turn on its `fills`)."""
        return CachedView(self, rel, self._size(rel))

    def prepare(self, files: list[FileSpan]) -> int:
        """Index the files of `files` not indexed yet (`dl.kits.remote.plans.FilePlans.prepare`); returns the bytes
        the spans need from the store. With prefetch the indexes are read through the cache, where readers find
        them, but for each file's checked index bytes (`moov`, parquet footer), which a reader fetches again and
        checks. Raises as reads."""
        t0 = time.perf_counter()
        try:
            known = set(self.plans.files)
            read = self._read_blocks if self.options.prefetch else self._fetch
            needed = self.plans.prepare(files, self._size, read, self.url, indexes_of(self))
            for rel in set(self.plans.files) - known if self.options.prefetch else ():
                lo, hi = self.plans.files[rel].check[:2]  # fetched again by a reader, which checks them
                for block in range(lo // BLOCK_BYTES, (hi - 1) // BLOCK_BYTES + 1):
                    self._here().cache.remove(self._name(rel), block)
            return needed
        finally:
            self.metadata_s += time.perf_counter() - t0

    def _read_blocks(self, rel: str, start: int, end: int) -> bytes:
        """Bytes `[start, end)` of `rel` through the cache."""
        with self.open(rel) as f:
            f.seek(start)
            return f.read(end - start)

    def admit(self, key: object, files: list[FileSpan], wait: bool = False) -> None:
        """Count what `key` needs and, with prefetch, queue the downloads of its blocks (`wait`: fetch them all in
        this thread instead, before returning, raising as reads)."""
        videos = indexes_of(self)
        pieces, needed = self.plans.pieces(files, self._size, videos, self.url)
        self.counters.add("bytes_needed", needed)
        reads = ([r for span in files for r in self.plans.ranked(span, self._size, videos)]
                 if any(span.reads for span in files) else [])
        if not self.options.prefetch:
            return
        here = self._here()
        runs = block_runs(pieces, reads, BLOCK_BYTES)
        here.held.setdefault(key, []).extend(runs)
        for run in sorted(runs) if wait else ():  # here, first to last, and those another process fetches waited for
            self._fetch_blocks(run.rel, run.first, run.last, wait=True)
        for run in runs if not wait else ():
            here.prefetcher.submit(key, run.depth, lambda run=run: self._fetch_blocks(run.rel, run.first, run.last))

    def release(self, key: object, drop: bool = False) -> None:
        """Drop `key`'s downloads not started; `drop`: delete its blocks from the cache too."""
        if not self.options.prefetch:
            return
        here = self._here()
        here.prefetcher.cancel(key)
        runs = here.held.pop(key, [])
        for run in runs if drop else ():
            for block in range(run.first, run.last + 1):
                here.cache.remove(self._name(run.rel), block)

    def state(self) -> dict:
        """Listing facts and sizes, file plans, and the seconds spent on metadata (JSON-ready)."""
        return {"facts": self._facts, "sizes": self._sizes, **self.plans.state(), "metadata_s": self.metadata_s}

    def restore(self, state: dict) -> None:
        """Take back `state()` from the process that listed and indexed the files (no request for their sizes)."""
        self._facts.update(state.get("facts", {}))
        self._sizes.update(state.get("sizes", {}))
        self.plans.restore(state)
        self.metadata_s = float(state.get("metadata_s", 0.0))

    def block_path(self, rel: str, block: int, wait: bool = True) -> str | None:
        """The cache's file of block `block` of `rel`, fetched or waited for when not there (`wait=False`: None)."""
        here, name = self._here(), self._name(rel)
        path = here.cache.get(name, block)
        if path is None and wait:
            t0 = time.perf_counter()
            self._fetch_blocks(rel, block, block, wait=True)
            self.counters.add("network_wait_us", int((time.perf_counter() - t0) * 1e6))
            path = here.cache.get(name, block)
            if path is None:  # evicted at once: the cache is smaller than what is read at a time
                raise DlError(f"{self.url}/{rel}: block {block} left the cache before it was read; raise the source "
                              "option cache_bytes.")
        if path is not None:
            self.counters.add("cache_hits")
        return path

    def _fetch_blocks(self, rel: str, first: int, last: int, wait: bool = False) -> None:
        """Download the blocks `first..last` of `rel` not in the cache, one request per stretch of them whose locks
        this thread takes; a block another thread or process holds is left to it (`wait`: waited for). Raises as
        reads, and `RemoteReadError` for index bytes that changed since they were indexed (`_check`)."""
        cache, name = self._here().cache, self._name(rel)
        plan = self.plans.files.get(rel)
        if plan is not None and first * BLOCK_BYTES < plan.check[1] and plan.check[0] < (last + 1) * BLOCK_BYTES:
            first, last = min(first, plan.check[0] // BLOCK_BYTES), max(last, (plan.check[1] - 1) // BLOCK_BYTES)
        last = min(last, (self._size(rel) - 1) // BLOCK_BYTES)
        held: list[tuple[int, filelock.FileLock]] = []
        try:
            for block in range(first, last + 1):
                if cache.get(name, block) is not None:
                    self._download(rel, held)
                    continue
                lock = cache.lock(name, block)
                try:
                    lock.acquire(timeout=0)
                except filelock.Timeout:  # another is fetching it
                    self._download(rel, held)
                    if not wait:
                        continue
                    lock.acquire()
                if cache.get(name, block) is not None:  # fetched while this thread waited
                    lock.release()
                    self._download(rel, held)
                else:
                    held.append((block, lock))
            self._download(rel, held)
        finally:
            for _, lock in held:
                lock.release()

    def _download(self, rel: str, held: list) -> None:
        """Fetch the blocks `held` (adjacent, their locks taken), writing each to the cache as its bytes arrive and
        releasing its lock; `held` is empty after."""
        if not held:
            return
        cache, name, size = self._here().cache, self._name(rel), self._size(rel)
        start, end = held[0][0] * BLOCK_BYTES, min(size, (held[-1][0] + 1) * BLOCK_BYTES)
        plan = self.plans.files.get(rel)
        check = plan.check if plan is not None and start <= plan.check[0] and plan.check[1] <= end else None
        got = bytearray()

        def take(data: bytes) -> None:
            got.extend(data)
            while held and len(got) >= min(size, (held[0][0] + 1) * BLOCK_BYTES) - start:
                block, lock = held[0]
                lo, hi = block * BLOCK_BYTES - start, min(size, (block + 1) * BLOCK_BYTES) - start
                if check is not None and start + hi >= check[0]:
                    self._check(rel, check, got, start)
                cache.save(name, block, memoryview(got)[lo:hi])
                lock.release()
                held.pop(0)

        self.fetch_into(rel, start, end, take)
        self.counters.add("ranges_prefetched")
        self.counters.add("bytes_prefetched", end - start)

    def _check(self, rel: str, check: tuple, got: bytearray, start: int) -> None:
        """Raise when `got` (bytes from `start`) holds all of the index bytes `check` and they differ from those
        indexed (its blocks are then never written whole)."""
        if len(got) + start >= check[1] and digest(bytes(got[check[0] - start:check[1] - start])) != check[2]:
            raise RemoteReadError(
                f"{self.url}/{rel} changed since it was indexed (bytes {check[0]}-{check[1]}, its container index or "
                "parquet footer, differ): its frames may have moved. Start the run again to index the new version.")


class _Local:
    """One process's cache (a `HostCache` of `folder`, at most `cache_bytes`), download threads (`threads` of them)
    and admitted blocks by key."""

    def __init__(self, folder: Path, cache_bytes: int, threads: int):
        self.cache, self.prefetcher = HostCache(folder, cache_bytes), Prefetcher(threads)
        self.held: dict[object, list] = {}

