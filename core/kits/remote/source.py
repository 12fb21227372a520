"""`RemoteSource`: a `dl.kits.remote.store.RemoteStore` (every request retried, counted and checked) that reads
episodes as byte ranges and prefetches them; the `hub` and `bucket` plugins build one. It adds:

- byte ranges: `prepare` reads, once per run in the process that builds the loader, the index of every file
  the selected episodes use (an MP4's `moov`, a parquet footer: `dl.kits.remote.file_plan`) and turns each
  episode's span into byte ranges: its frames from the keyframe at or before the first, its row groups. The
  indexes travel to DataLoader workers with the pickled source and to ranks through `state()` in the
  metadata snapshot. A file that cannot be indexed (not an MP4 or parquet, fragmented) is read whole;
- prefetch: on `admit` the episode's ranges (and each file's index bytes) start downloading into a
  `dl.kits.remote.file_cache.PrefetchCache` (one per reading process, byte-bounded, reference-counted, ranges
  as the unit: episodes of one file share what they have in common; ranges this host's other processes hold
  are copied from them, not fetched: `dl.kits.remote.peer_copies`); `release` frees them. Decoders and
  pyarrow read through a `dl.kits.remote.views.CachedView` that serves the cached ranges and reads anything
  else remotely; a file opened before any of it was admitted streams through the same view, buffered: its reads
  go to the store in `block_size` requests until ranges of it are admitted, then to those ranges;
- checks: index bytes that differ from those indexed (the file changed since) fail with an error naming the
  file instead of feeding a decoder other bytes;
- counters (`dl.kits.remote.source_counters`), beside the store's: cache hits, the bytes the admitted episodes
  need (read amplification = fetched / needed), the peak bytes the cache reserved, the pieces copied from this
  host's other processes and the time to the first admission's bytes; it is `dl.ReportsStats`, so `dl run`
  reports them as `source_stats`.
"""

import hashlib
import io
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import torch.utils.data

from ...contracts.errors import DlError
from ...contracts.source import FileSpan
from .cache_entry import Located
from .file_cache import Piece, PrefetchCache
from .file_plan import digest
from .piece_order import CALM_COALESCE_BYTES
from .plans import FilePlans
from .retry import RemoteReadError, RetryPolicy
from .run_folders import default_base
from .store import RemoteStore
from .views import CachedView

if TYPE_CHECKING:
    import fsspec

CHUNK_BYTES = 8 << 20
"""Downloads go in requests of at most this size, so a reset mid-file costs one request, not the file."""
INDEX_KEY = "dl: the index bytes prepare read"
"""The cache key holding what `prepare` read to index the files (for as long as the process runs)."""


class RemoteSource(RemoteStore):
    """A dataset root on a remote fsspec filesystem, read with retries, counters, byte-range plans and prefetch.

    Args:
        fs, root, name, url, meta_fs, meta_root, retry, pinned, fs_settings: as `dl.kits.remote.store.RemoteStore`.
        prefetch: download admitted episodes' ranges in the background (else every read streams).
        cache_bytes: the cache's byte limit for the whole DataLoader (each of N workers gets 1/N).
        cache_dir: the folder of the cache's run folders (None: `dl.kits.remote.run_folders.default_base()`,
            node-local storage first), resolved in each reading process (on its node).
        prefetch_threads: download threads per reading process.
        block_size: bytes per request of a read outside the cached ranges (read-ahead of streamed files).

    Raises (from reads): `SourceFileNotFoundError` (404: never retried), `dl.kits.remote.retry.RemoteReadError`
    (also for a file that changed since it was listed or indexed).
    """

    def __init__(self, fs: "fsspec.AbstractFileSystem", root: str, name: str, *, url: str | None = None,
                 meta_fs: "fsspec.AbstractFileSystem | None" = None, meta_root: str | None = None,
                 retry: RetryPolicy | None = None, prefetch: bool = True, cache_bytes: int = 8_000_000_000,
                 prefetch_threads: int = 4, block_size: int = 1 << 20, pinned: dict | None = None,
                 fs_settings: dict[str, dict] | None = None, cache_dir: str | None = None):
        super().__init__(fs, root, name, url=url, meta_fs=meta_fs, meta_root=meta_root, retry=retry, pinned=pinned,
                         fs_settings=fs_settings)
        self.prefetch, self.cache_bytes, self.cache_dir = bool(prefetch), int(cache_bytes), cache_dir
        self.prefetch_threads, self.block_size = int(prefetch_threads), int(block_size)
        if self.cache_bytes < 1 or self.block_size < 1 or self.prefetch_threads < 1:
            raise DlError(f"source {name}: cache_bytes, block_size and prefetch_threads must be >= 1.")
        self.plans = FilePlans()  # indexed files and the byte ranges of their spans
        self.selection_bytes = 0  # what the last `prepare` said its spans need from the store
        self._proc: _ProcessState | None = None
        self._inherit: dict[str, list[Located]] = {}

    def __getstate__(self):
        state = super().__getstate__()
        proc = state.pop("_proc")
        state["_proc"] = None
        if proc is not None and proc.cache is not None and proc.settled is not None:  # spawned children too
            state["_inherit"] = proc.cache.ready_pieces()
        return state

    # ------------------------------------------------------------------------------------ per process
    def _state(self) -> "_ProcessState":
        proc = self._proc
        if proc is None or proc.pid != os.getpid():
            inherited = dict(self._inherit)
            if proc is not None and proc.settled is not None:  # forked after `settle()`
                inherited.update(proc.settled)  # not the parent's cache: a lock held at the fork stays held
            proc = self._proc = _ProcessState(inherited)
        return proc

    def _cache(self) -> PrefetchCache:
        proc = self._state()
        if proc.cache is None:
            info = torch.utils.data.get_worker_info()
            limit = self.cache_bytes // (info.num_workers if info is not None else 1)
            base = Path(os.path.expanduser(self.cache_dir)) if self.cache_dir else default_base()
            proc.cache = PrefetchCache(base, limit, self._download, self.prefetch_threads,
                                       on_reserved=lambda n: self.counters.peak("cache_bytes_peak", n),
                                       on_done=self._first_admission_done, inherited=proc.inherited,
                                       keep_released=self._keeps(limit), shared=self._shared_name,
                                       on_copied=self._copied_from_peer, calm_coalesce_bytes=CALM_COALESCE_BYTES)
        return proc.cache

    def _keeps(self, limit: int) -> bool:
        """Whether a cache of `limit` bytes keeps released ranges: when the selection fits it."""
        return 0 < self.selection_bytes <= limit

    def _shared_name(self, rel: str) -> str | None:
        """The name under which this host's processes share their cached ranges of `rel`: a digest of the
        dataset's URL, the file and its listed version (size and ETag or checksum), so a changed file or another
        dataset never matches; None for a file not listed (no version known: not shared)."""
        facts = self._facts.get(rel)
        if facts is None:
            return None
        return hashlib.sha1(f"{self.url}\n{rel}\n{facts}".encode()).hexdigest()[:24]

    def _copied_from_peer(self, size: int) -> None:
        self.counters.add("ranges_from_peers")
        self.counters.add("bytes_from_peers", size)

    # ------------------------------------------------------------------------------------ the Source API
    def open(self, rel: str) -> BinaryIO:
        """A view of the cached ranges when `rel` was admitted (waiting for downloads; reads elsewhere go
        remote), else a seekable file streaming `block_size` ranges (`_stream`)."""
        if self._held(rel):
            return io.BufferedReader(CachedView(self, rel, self._size(rel), self.block_size), 64 << 10)
        return self._stream(rel)

    def _stream(self, rel: str) -> BinaryIO:
        """A seekable file over `rel`, none of which is cached yet: a `CachedView` buffered by `block_size`, so each
        read the buffer does not hold asks the store for `block_size` bytes, until ranges of `rel` are admitted:
        from then on the view serves those from the cache. A reader opened early and kept (the decoder that
        checked a file's stream when the dataset was opened, which this process's decoder cache holds on to)
        thus never fetches again the bytes the cache downloads."""
        size = self._size(rel)  # also raises SourceFileNotFoundError for a missing file
        return io.BufferedReader(CachedView(self, rel, size, self.block_size), buffer_size=self.block_size)

    def read_bytes(self, rel: str, start: int | None = None, end: int | None = None) -> bytes:
        if self._held(rel):
            with self.open(rel) as f:
                size = self._size(rel)
                lo = 0 if start is None else (start + size if start < 0 else start)
                hi = size if end is None else (end + size if end < 0 else end)
                f.seek(lo)
                return f.read(max(0, hi - lo))
        t0 = time.perf_counter()
        try:
            return self._fetch(rel, start, end)
        finally:
            waited = time.perf_counter() - t0
            self.counters.add("network_wait_us", int(waited * 1e6))
            if rel.startswith("meta/"):
                self.metadata_s += waited

    def video_input(self, rel: str) -> str | BinaryIO:
        """The local copy's path when `rel` is cached whole, a view of its cached ranges when it was admitted
        (a `CachedView`: a decoder that reads on after a short read may turn on its `fills`), else a streaming
        file."""
        if not self._held(rel):
            return self._stream(rel)
        located = self.cached(rel, 0)
        if located is not None and located.start == located.offset == 0 and located.end >= self._size(rel):
            return located.path
        return CachedView(self, rel, self._size(rel), self.block_size)

    # ------------------------------------------------------------------------------------ byte ranges
    def prepare(self, files: list[FileSpan]) -> int:
        """Index every file of `files` that has a time span (an MP4) or an episode (a parquet data file) and
        is not indexed yet, and turn each span into byte ranges (`dl.kits.remote.plans.FilePlans.prepare`).
        Returns the bytes the spans need from the store (each file's index bytes once, plus the union of its
        spans' ranges), kept as `selection_bytes`: where they fit in a process's share of `cache_bytes`, its cache
        keeps released ranges for later epochs (`PrefetchCache.keep_released`); a larger selection would gain
        nothing from them but disk use. Where the selection fits this process's cache, the bytes read to index the
        files stay in it (`_keep_index_bytes`): every reader of a file reads them, and this host's other processes
        of the run (its ranks, their DataLoader workers) copy them from there instead of fetching them again.

        Raises:
            SourceFileNotFoundError, RemoteReadError: as reads.
        """
        t0 = time.perf_counter()
        read: list[tuple[str, int, bytes]] = []  # what indexing read: (file, offset, bytes)

        def remote_read(rel: str, start: int, end: int) -> bytes:
            data = self.remote_read(rel, start, end)
            read.append((rel, start, data))
            return data

        try:
            self.selection_bytes = self.plans.prepare(files, self._size, remote_read, self.url)
            cache = self._state().cache  # made already if metadata was read through it
            if cache is not None:
                cache.keep_released = self._keeps(cache.limit)
            if self.prefetch and read and self._keeps(self._cache().limit):
                self._keep_index_bytes(read)
            return self.selection_bytes
        finally:
            self.metadata_s += time.perf_counter() - t0

    def _keep_index_bytes(self, read: list[tuple[str, int, bytes]]) -> None:
        """Put what `prepare` read of indexed files (`(file, offset, bytes)`) in this process's cache, except each
        file's `check` bytes (its `moov`, its parquet footer): a reader fetches those itself, and their digest is
        what tells it the file changed since it was indexed (`_download`), so it never decodes new frames through
        an old index."""
        for rel, start, data in read:
            plan = self.plans.files.get(rel)
            if plan is None:
                continue
            lo, hi = plan.check[:2]
            end = start + len(data)
            for a, b in ((start, min(end, lo)), (max(start, hi), end)):
                if a < b:
                    self._cache().put(INDEX_KEY, rel, a, data[a - start:b - start])

    def admit(self, key: object, files: list[FileSpan]) -> None:
        """Count what `key` needs and, with prefetch, queue its byte ranges for download (never blocks), those
        its spans' `reads` rank first first (`dl.kits.remote.piece_order`).

        Raises:
            dl.kits.remote.file_cache.CacheLimitError: the ranges do not fit in the cache at all.
        """
        pieces, reads = [], []
        ordered = any(span.reads for span in files)
        for span in files:
            wanted, needed = self.plans.pieces(span, self._size)
            pieces += wanted
            reads += self.plans.ranked(span, wanted) if ordered else []
            self.counters.add("bytes_needed", needed)
        if self.prefetch:
            proc = self._state()
            if proc.first is None:
                proc.first = (key, time.perf_counter())
            checked = [Piece(rel, *self.plans.files[rel].check[:2]) for rel in {p.rel for p in pieces}
                       if rel in self.plans.files]  # index bytes are checked in one piece (`_download`)
            self._cache().admit(key, pieces, atomic=checked, reads=reads)

    def fetches(self, files: Iterable[FileSpan]) -> bool:
        """False when admitting `files` would download nothing: without prefetch (admission downloads nothing), or
        when every range they need is downloaded in this process's cache or held by another cache of this host
        (`PrefetchCache.on_host`: copied, not fetched), as in every epoch after the first of a selection that fits
        the cache. Not looked up (True): a selection that does not fit (its ranges are not kept between epochs), or
        a process whose cache has admitted nothing yet."""
        if not self.prefetch:
            return False
        cache = self._cache()
        if not cache.keep_released or cache.dir is None:
            return True
        return not cache.on_host([piece for span in files for piece in self.plans.pieces(span, self._size)[0]])

    def expect(self, key: object, files: list[FileSpan]) -> None:
        """Download the bytes of the `reads` of `files` next among those queued (`PrefetchCache.promote`)."""
        if self.prefetch and self._state().cache is not None:
            self._state().cache.promote([Piece(r.rel, r.start, r.end) for span in files if span.reads
                                         for r in self.plans.ranked(span, self.plans.pieces(span, self._size)[0])])

    def release(self, key: object) -> None:
        if self.prefetch and self._state().cache is not None:
            self._state().cache.release(key)

    def discard(self, key: object) -> None:
        proc = self._state()
        if self.prefetch and proc.cache is not None:
            proc.cache.release(key, keep=False)
            if proc.settled is not None:  # children forked from now on do not look for what went
                proc.settled = proc.cache.ready_pieces()

    def settle(self) -> None:
        """Wait for every admitted download of this process (see `PrefetchCache.settle`)."""
        proc = self._state()
        if self.prefetch and proc.cache is not None:
            t0 = time.perf_counter()
            proc.cache.settle()
            self.counters.add("network_wait_us", int((time.perf_counter() - t0) * 1e6))
            proc.settled = proc.cache.ready_pieces()  # held now, so children may read it

    def state(self) -> dict:
        """Listing facts and sizes, file plans and span ranges, and the seconds spent on metadata (JSON-ready)."""
        return {"facts": self._facts, "sizes": self._sizes, **self.plans.state(),
                "metadata_s": round(self.metadata_s, 6)}

    def restore(self, state: dict) -> None:
        """Take back `state()` from the process that listed and indexed the files: a file it listed is then opened
        without a request for its size."""
        self._facts.update(state.get("facts", {}))
        self._sizes.update(state.get("sizes", {}))
        self.plans.restore(state)
        self.metadata_s = float(state.get("metadata_s", 0.0))

    def _held(self, rel: str) -> bool:
        """Whether reads of `rel` should look in this process's cache first."""
        self.path(rel)  # refuse unsafe paths before anything else
        proc = self._state()
        if self.prefetch:
            return self._cache().held(rel)
        return rel in proc.inherited

    def cached(self, rel: str, pos: int, wait: bool = True) -> Located | None:
        """The local copy of the cached range of `rel` holding `pos` (waiting for its download; counted as a
        cache hit, the wait as network wait), or None to read it remotely. `wait=False`: only a range already
        downloaded, else None (`PrefetchCache.locate`)."""
        proc = self._state()
        t0 = time.perf_counter()
        if self.prefetch:
            located = self._cache().locate(rel, pos, wait)
        else:
            located = next((p for p in proc.inherited.get(rel, ()) if p.start <= pos < p.end
                            and os.path.exists(p.path)), None)
        waited = time.perf_counter() - t0
        if waited > 1e-3:
            self.counters.add("network_wait_us", int(waited * 1e6))
        if located is not None:
            self.counters.add("cache_hits")
        return located

    def _download(self, rel: str, start: int, end: int, out: BinaryIO) -> None:
        """Bytes `[start, end)` of `rel` written into `out` as they arrive, in `CHUNK_BYTES` requests (each retried
        on its own, from where it stopped); the index bytes of a planned file are checked against those indexed
        before the block completing them is written, so `out` never holds a changed index whole.

        Raises:
            RemoteReadError: a short range, or index bytes that changed since they were indexed.
        """
        plan = self.plans.files.get(rel)
        check = plan.check if plan is not None and start <= plan.check[0] and plan.check[1] <= end else None
        seen, at = bytearray(), start

        def take(block: bytes) -> None:
            nonlocal at
            if check is not None and at < check[1]:
                seen.extend(block[max(0, check[0] - at):max(0, check[1] - at)])
                if at + len(block) >= check[1] and digest(bytes(seen)) != check[2]:
                    raise RemoteReadError(
                        f"{self.url}/{rel} changed since it was indexed (bytes {check[0]}-{check[1]}, its container "
                        "index or parquet footer, differ): its frames may have moved. Start the run again to index "
                        "the new version.")
            out.write(block)
            at += len(block)

        for chunk in range(start, end, CHUNK_BYTES):
            self.fetch_into(rel, chunk, min(chunk + CHUNK_BYTES, end), take)
        self.counters.add("ranges_prefetched")
        self.counters.add("bytes_prefetched", end - start)

    def _first_admission_done(self) -> None:
        """After a download: once the first piece of every range of this process's first admission is local
        (what a reader starts on), count the wait."""
        proc = self._state()
        first = proc.first
        if (first is not None and not proc.first_done and proc.cache is not None
                and proc.cache.ready(first[0], depth=0)):
            proc.first_done = True
            self.counters.peak("first_admission_us", int((time.perf_counter() - proc.first[1]) * 1e6))


class _ProcessState:
    """What one process holds: its pid, its cache and its first admission (key, start time)."""

    def __init__(self, inherited: dict[str, list[Located]]):
        self.pid, self.inherited = os.getpid(), inherited
        self.cache: PrefetchCache | None = None
        # a loader settled its admissions: the ranges ready then, which DataLoader workers forked later read
        self.settled: dict[str, list[Located]] | None = None
        self.first: tuple[object, float] | None = None
        self.first_done = False
