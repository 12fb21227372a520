"""`RemoteSource`: the one wrapper every remote read of a source goes through.

Generic over fsspec filesystems (S3, GCS, the Hugging Face Hub, HTTP, memory...): the `hub` and `bucket`
plugins build one. It adds, in one place:

- retries: every request (listing, file facts, byte range) runs under a `dl.kits.remote.retry.RetryPolicy`, which
  retries transient errors with backoff and raises a clear error naming the URL when it gives up;
- counters: requests, bytes fetched, retries, 429s, failures, cache hits, the bytes the admitted episodes
  need (read amplification = fetched / needed), the peak bytes the cache reserved and the seconds readers
  waited on the network, summed over DataLoader workers (`dl.dataloader.shared_counters.SharedCounters`); it is
  `dl.ReportsStats`, so `dl run` reports them as `source_stats`;
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
  else remotely; files not cached at all stream through a buffered ranged-read file;
- checks: a range that comes back shorter than asked, or index bytes that differ from those indexed (the
  file changed since), fail with an error naming the file instead of feeding a decoder other bytes.
"""

import hashlib
import io
import os
import posixpath
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import fsspec
import torch.utils.data

from ...contracts.errors import DlError
from ...contracts.source import FileSpan, Source, file_facts
from ...dataloader.shared_counters import SharedCounters
from .file_cache import Located, Piece, PrefetchCache
from .file_plan import digest
from .fork_guard import request_in_flight
from .plans import FilePlans
from .retry import Failure, RemoteReadError, RetryPolicy, classify
from .run_folders import default_base
from .views import CachedView, RangeReader

if TYPE_CHECKING:
    import fsspec

COUNTERS = ("requests", "bytes_fetched", "retries", "throttled_429", "server_errors", "failures", "cache_hits",
            "remote_reads", "ranges_prefetched", "bytes_prefetched", "bytes_needed", "cache_bytes_peak",
            "network_wait_us", "first_admission_us", "ranges_from_peers", "bytes_from_peers")
CHUNK_BYTES = 8 << 20
"""Downloads go in requests of at most this size, so a reset mid-file costs one request, not the file."""



class RemoteSource(Source):
    """A dataset root on a remote fsspec filesystem, read with retries, counters, byte-range plans and prefetch.

    Args:
        fs, root, name: as `dl.Source` (the bulk files: data and videos).
        url: the dataset's URL for messages, results and cache keys (default: `fs.unstrip_protocol(root)`).
        meta_fs, meta_root: where `meta/` lives when it is elsewhere (metadata on the Hub, data in a bucket).
        retry: the retry policy of every request.
        prefetch: download admitted episodes' ranges in the background (else every read streams).
        cache_bytes: the cache's byte limit for the whole DataLoader (each of N workers gets 1/N).
        cache_dir: the folder of the cache's run folders (None: `dl.kits.remote.run_folders.default_base()`,
            node-local storage first), resolved in each reading process (on its node).
        prefetch_threads: download threads per reading process.
        block_size: bytes per request of a read outside the cached ranges (read-ahead of streamed files).
        pinned: what `pinned_options()` returns.
        fs_settings: `{filesystem class name: {attribute: value}}` set on each process's filesystem instances
            (e.g. s3fs's own `retries` attribute, which its constructor does not take).

    Raises (from reads): `SourceFileNotFoundError` (404: never retried), `dl.kits.remote.retry.RemoteReadError`
    (also for a file that changed since it was listed or indexed).
    """

    stats_merge = dict.fromkeys(COUNTERS, "sum") | {"read_amplification": "mean", "network_wait_s": "max",
                                                    "first_admission_s": "max", "metadata_s": "max"}

    def __init__(self, fs: "fsspec.AbstractFileSystem", root: str, name: str, *, url: str | None = None,
                 meta_fs: "fsspec.AbstractFileSystem | None" = None, meta_root: str | None = None,
                 retry: RetryPolicy | None = None, prefetch: bool = True, cache_bytes: int = 8_000_000_000,
                 prefetch_threads: int = 4, block_size: int = 1 << 20, pinned: dict | None = None,
                 fs_settings: dict[str, dict] | None = None, cache_dir: str | None = None):
        super().__init__(fs, root, name)
        if url is not None:
            self.__dict__["url"] = url  # the cached_property's slot
        self._meta_fs, self._meta_pid = meta_fs, os.getpid()
        self.meta_root = (meta_root.rstrip("/") if meta_root is not None else None)
        self.retry = retry or RetryPolicy()
        self.prefetch, self.cache_bytes, self.cache_dir = bool(prefetch), int(cache_bytes), cache_dir
        self.prefetch_threads, self.block_size = int(prefetch_threads), int(block_size)
        if self.cache_bytes < 1 or self.block_size < 1 or self.prefetch_threads < 1:
            raise DlError(f"source {name}: cache_bytes, block_size and prefetch_threads must be >= 1.")
        self._pinned = dict(pinned or {})
        self.fs_settings = dict(fs_settings or {})
        self.counters = SharedCounters(COUNTERS)
        self._sizes: dict[str, int] = {}
        self._facts: dict[str, str] = {}  # fingerprints from listings
        self.plans = FilePlans()  # indexed files and the byte ranges of their spans
        self.selection_bytes = 0  # what the last `prepare` said its spans need from the store
        self.metadata_s = 0.0  # seconds spent listing, reading metadata and indexing (host and this process)
        self._proc: _ProcessState | None = None
        self._inherit: dict[str, list[Located]] = {}

    def __getstate__(self):
        state = self.__dict__.copy()
        proc = state.pop("_proc")
        state["_proc"] = None
        if proc is not None and proc.cache is not None and proc.settled:  # spawned children read these too
            state["_inherit"] = proc.cache.ready_pieces()
        return state

    # ------------------------------------------------------------------------------------ per process
    def _state(self) -> "_ProcessState":
        proc = self._proc
        if proc is None or proc.pid != os.getpid():
            inherited = dict(self._inherit)
            if proc is not None and proc.cache is not None and proc.settled:  # forked after `settle()`
                inherited.update(proc.cache.ready_pieces())
            proc = self._proc = _ProcessState(inherited)
        return proc

    def _cache(self) -> PrefetchCache:
        proc = self._state()
        if proc.cache is None:
            info = torch.utils.data.get_worker_info()
            limit = self.cache_bytes // (info.num_workers if info is not None else 1)
            base = Path(os.path.expanduser(self.cache_dir)) if self.cache_dir else default_base()
            proc.cache = PrefetchCache(base, limit, self._download, self.prefetch_threads,
                                       on_reserved=lambda n: self._count_max("cache_bytes_peak", n),
                                       on_done=self._first_admission_done, inherited=proc.inherited,
                                       keep_released=self._keeps(limit), shared=self._shared_name,
                                       on_copied=self._copied_from_peer)
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
        self._count("ranges_from_peers")
        self._count("bytes_from_peers", size)

    def _count(self, name: str, n: int = 1) -> None:
        with self._state().lock:
            self.counters.add(name, n)

    def _count_max(self, name: str, n: int) -> None:
        with self._state().lock:
            self.counters.set_max(name, n)

    @property
    def fs(self) -> "fsspec.AbstractFileSystem":
        """This process's filesystem for the bulk files (rebuilt after fork, with `fs_settings` applied)."""
        return self._tuned(Source.fs.fget(self))

    @property
    def meta_fs(self) -> "fsspec.AbstractFileSystem":
        """This process's filesystem for `meta/` (the bulk one unless metadata lives elsewhere)."""
        if self._meta_fs is None:
            return self.fs
        proc = self._state()
        if proc.meta_fs is None:
            fs = self._meta_fs
            proc.meta_fs = fs if proc.pid == self._meta_pid else type(fs)(*fs.storage_args, **fs.storage_options)
        return self._tuned(proc.meta_fs)

    def _tuned(self, fs: "fsspec.AbstractFileSystem") -> "fsspec.AbstractFileSystem":
        for attribute, value in self.fs_settings.get(type(fs).__name__, {}).items():
            if getattr(fs, attribute, None) != value:
                setattr(fs, attribute, value)
        return fs

    def _where(self, rel: str) -> tuple["fsspec.AbstractFileSystem", str]:
        """(filesystem, full path) of `rel` (checked by `path`)."""
        full = self.path(rel)
        if self.meta_root is not None and (rel == "meta" or rel.startswith("meta/")):
            return self.meta_fs, self.meta_root + full[len(self.root):]
        return self.fs, full

    # ------------------------------------------------------------------------------------ requests
    def _call(self, rel: str, request):
        """`request()` under the retry policy, counted."""
        def attempt():
            self._count("requests")
            with request_in_flight():  # no DataLoader worker is forked in the middle of it (dl.kits.remote.fork_guard)
                return request()

        try:
            return self.retry.call(attempt, f"{self.url}/{rel}", self._on_retry)
        except RemoteReadError:
            self._count("failures")
            raise

    def _on_retry(self, failure: Failure) -> None:
        self._count("retries")
        if failure.status == 429:
            self._count("throttled_429")
        elif failure.status is not None and failure.status >= 500:
            self._count("server_errors")

    def _fetch(self, rel: str, start: int | None, end: int | None) -> bytes:
        """Bytes `[start, end)` of `rel` (None: the file's start / end; negative: from the end), one request.

        Raises:
            RemoteReadError: fewer bytes came back than a bounded range asked for (the file is shorter than
                listed or indexed: it changed).
        """
        if (start is not None and start < 0) or (end is not None and end < 0):
            size = self._size(rel)
            start = None if start is None else (start + size if start < 0 else start)
            end = None if end is None else (end + size if end < 0 else end)
        if start is not None and end is not None and end <= start:
            return b""
        fs, path = self._where(rel)
        try:
            data = self._call(rel, lambda: self.request_range(fs, path, start, end))
        except RemoteReadError as exc:
            if exc.__cause__ is not None and classify(exc.__cause__).status == 416:  # range not satisfiable
                raise RemoteReadError(
                    f"{self.url}/{rel}: bytes {start or 0}-{end} lie past the end of the file (listed at "
                    f"{self._sizes.get(rel, '?')} bytes): the file changed since it was listed. Start the run again "
                    "to read the new version.") from None
            raise
        self._count("bytes_fetched", len(data))
        if end is not None and len(data) != end - (start or 0) and (rel not in self._sizes or end <= self._sizes[rel]):
            raise RemoteReadError(f"{self.url}/{rel}: asked for bytes {start or 0}-{end} of a file listed at "
                                  f"{self._sizes.get(rel, '?')} bytes, got {len(data)}: the file changed since it "
                                  "was listed. Start the run again to read the new version.")
        return data

    def request_range(self, fs: "fsspec.AbstractFileSystem", path: str, start: int | None, end: int | None) -> bytes:
        """One request for bytes `[start, end)` of `path` on `fs` (non-negative offsets or None). Sources
        whose filesystem reads ranges in several requests, or retries on its own, override it."""
        return fs.cat_file(path, start=start, end=end)

    def _size(self, rel: str) -> int:
        size = self._sizes.get(rel)
        if size is None:
            size = self._sizes[rel] = int(self._info(rel).get("size") or 0)
        return size

    def _info(self, rel: str) -> dict:
        fs, path = self._where(rel)
        return self._call(rel, lambda: fs.info(path))

    def remote_read(self, rel: str, start: int, end: int) -> bytes:
        """Bytes `[start, end)` of `rel` from the store, counted as a remote read and network wait (the
        views' reads outside the cache)."""
        t0 = time.perf_counter()
        try:
            self._count("remote_reads")
            return self._fetch(rel, start, end)
        finally:
            self._count("network_wait_us", int((time.perf_counter() - t0) * 1e6))

    # ------------------------------------------------------------------------------------ the Source API
    def list_files(self, folder: str) -> dict[str, int]:
        """As `Source.list_files`, retried and counted; the sizes and fingerprints (`file_facts` of the
        listing's entries: ETag, checksum or time) are kept, so `fingerprint` asks nothing per file."""
        t0 = time.perf_counter()
        fs, base = self._where(folder)
        clean = posixpath.normpath(folder)
        root = base[: len(base) - len(clean)].rstrip("/") if clean != "." else base

        def find():
            try:
                return fs.find(base, detail=True)
            except FileNotFoundError:
                return {}

        out = {}
        for full, info in self._call(folder, find).items():
            if info.get("type", "file") == "directory":
                continue
            full = fs._strip_protocol(full)
            rel = full[len(root) + 1:] if full.startswith(root + "/") else os.path.relpath(full, root)
            out[rel] = int(info.get("size") or 0)
            self._facts[rel] = file_facts(info)
        self._sizes.update(out)
        self.metadata_s += time.perf_counter() - t0
        return dict(sorted(out.items()))

    def open(self, rel: str) -> BinaryIO:
        """A view of the cached ranges when `rel` was admitted (waiting for downloads; reads elsewhere go
        remote), else a seekable file streaming `block_size` ranges."""
        if self._held(rel):
            return io.BufferedReader(CachedView(self, rel, self._size(rel), self.block_size), 64 << 10)
        return self._stream(rel)

    def _stream(self, rel: str) -> BinaryIO:
        size = self._size(rel)  # also raises SourceFileNotFoundError for a missing file
        self._count("remote_reads")
        return io.BufferedReader(RangeReader(self, rel, size), buffer_size=self.block_size)

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
            self._count("network_wait_us", int(waited * 1e6))
            if rel.startswith("meta/"):
                self.metadata_s += waited

    def fingerprint(self, rel: str) -> str:
        """The listing's facts of `rel` when it was listed (no request), else one `info` request."""
        facts = self._facts.get(rel)
        return facts if facts is not None else file_facts(self._info(rel))

    def video_input(self, rel: str) -> str | BinaryIO:
        """The local copy's path when `rel` is cached whole, a view of its cached ranges when it was admitted,
        else a streaming file."""
        if not self._held(rel):
            return self._stream(rel)
        located = self.cached(rel, 0)
        if located is not None and located.start == 0 and located.end >= self._size(rel):
            return located.path
        return CachedView(self, rel, self._size(rel), self.block_size)

    # ------------------------------------------------------------------------------------ byte ranges
    def prepare(self, files: list[FileSpan]) -> int:
        """Index every file of `files` that has a time span (an MP4) or an episode (a parquet data file) and
        is not indexed yet, and turn each span into byte ranges (`dl.kits.remote.plans.FilePlans.prepare`).
        Returns the bytes the spans need from the store (each file's index bytes once, plus the union of its
        spans' ranges), kept as `selection_bytes`: where they fit in a process's share of `cache_bytes`, its cache
        keeps released ranges for later epochs (`PrefetchCache.keep_released`); a larger selection would gain
        nothing from them but disk use.

        Raises:
            SourceFileNotFoundError, RemoteReadError: as reads.
        """
        t0 = time.perf_counter()
        try:
            self.selection_bytes = self.plans.prepare(files, self._size, self.remote_read, self.url)
            cache = self._state().cache  # made already if metadata was read through it
            if cache is not None:
                cache.keep_released = self._keeps(cache.limit)
            return self.selection_bytes
        finally:
            self.metadata_s += time.perf_counter() - t0

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
            self._count("bytes_needed", needed)
        if self.prefetch:
            proc = self._state()
            if proc.first is None:
                proc.first = (key, time.perf_counter())
            checked = [Piece(rel, *self.plans.files[rel].check[:2]) for rel in {p.rel for p in pieces}
                       if rel in self.plans.files]  # index bytes are checked in one piece (`_download`)
            self._cache().admit(key, pieces, atomic=checked, reads=reads)

    def expect(self, key: object, files: list[FileSpan]) -> None:
        """Download the bytes of the `reads` of `files` next among those queued (`PrefetchCache.promote`)."""
        if self.prefetch and self._state().cache is not None:
            self._state().cache.promote([Piece(r.rel, r.start, r.end) for span in files if span.reads
                                         for r in self.plans.ranked(span, self.plans.pieces(span, self._size)[0])])

    def release(self, key: object) -> None:
        if self.prefetch and self._state().cache is not None:
            self._state().cache.release(key)

    def settle(self) -> None:
        """Wait for every admitted download of this process (see `PrefetchCache.settle`)."""
        if self.prefetch and self._state().cache is not None:
            t0 = time.perf_counter()
            self._state().cache.settle()
            self._count("network_wait_us", int((time.perf_counter() - t0) * 1e6))
            self._state().settled = True  # what is held now stays held: children may read it

    def pinned_options(self) -> dict:
        return dict(self._pinned)

    def state(self) -> dict:
        """Listing facts, file plans and span ranges, and the seconds spent on metadata (JSON-ready)."""
        return {"facts": self._facts, **self.plans.state(), "metadata_s": round(self.metadata_s, 6)}

    def restore(self, state: dict) -> None:
        """Take back `state()` from the process that listed and indexed the files."""
        self._facts.update(state.get("facts", {}))
        self.plans.restore(state)
        self.metadata_s = float(state.get("metadata_s", 0.0))

    def _held(self, rel: str) -> bool:
        """Whether reads of `rel` should look in this process's cache first."""
        self.path(rel)  # refuse unsafe paths before anything else
        proc = self._state()
        if self.prefetch:
            return self._cache().held(rel)
        return rel in proc.inherited

    def cached(self, rel: str, pos: int) -> Located | None:
        """The local copy of the cached range of `rel` holding `pos` (waiting for its download; counted as a
        cache hit, the wait as network wait), or None to read it remotely."""
        proc = self._state()
        t0 = time.perf_counter()
        if self.prefetch:
            located = self._cache().locate(rel, pos)
        else:
            located = next((p for p in proc.inherited.get(rel, ()) if p.start <= pos < p.end
                            and os.path.exists(p.path)), None)
        waited = time.perf_counter() - t0
        if waited > 1e-3:
            self._count("network_wait_us", int(waited * 1e6))
        if located is not None:
            self._count("cache_hits")
        return located

    def _download(self, rel: str, start: int, end: int, out: BinaryIO) -> None:
        """Bytes `[start, end)` of `rel` into `out`, in `CHUNK_BYTES` requests (each retried on its own); the
        index bytes of a planned file are checked against those indexed.

        Raises:
            RemoteReadError: a short range, or index bytes that changed since they were indexed.
        """
        plan = self.plans.files.get(rel)
        check = plan.check if plan is not None and start <= plan.check[0] and plan.check[1] <= end else None
        seen = bytearray()
        for chunk in range(start, end, CHUNK_BYTES):
            data = self._fetch(rel, chunk, min(chunk + CHUNK_BYTES, end))
            if check is not None:
                seen += data[max(0, check[0] - chunk):max(0, check[1] - chunk)]
            out.write(data)
        if check is not None and digest(bytes(seen)) != check[2]:
            raise RemoteReadError(f"{self.url}/{rel} changed since it was indexed (bytes {check[0]}-{check[1]}, its "
                                  "container index or parquet footer, differ): its frames may have moved. Start "
                                  "the run again to index the new version.")
        self._count("ranges_prefetched")
        self._count("bytes_prefetched", end - start)

    def _first_admission_done(self) -> None:
        """After a download: once the first piece of every range of this process's first admission is local
        (what a reader starts on), count the wait."""
        proc = self._state()
        first = proc.first
        if (first is not None and not proc.first_done and proc.cache is not None
                and proc.cache.ready(first[0], depth=0)):
            proc.first_done = True
            self._count_max("first_admission_us", int((time.perf_counter() - proc.first[1]) * 1e6))

    # ------------------------------------------------------------------------------------ ReportsStats
    def reset_stats(self) -> None:
        """Zero the counters (the benchmark does after its single-process pass)."""
        self.counters.reset()

    def stats(self, num_workers: int = 0, batch_size: int = 1) -> dict:
        """Counters summed over this process and its DataLoader workers since the last reset:
        `requests`, `bytes_fetched`, `retries` (of which `throttled_429` and `server_errors`), `failures`
        (requests given up), `cache_hits` / `remote_reads` (reads served from cached ranges / from the store),
        `ranges_prefetched` (downloads: pieces of the admitted ranges), `bytes_prefetched`, `ranges_from_peers` and
        `bytes_from_peers` (pieces copied from the caches of this host's other processes instead: the host's pass,
        other workers, other ranks; `dl.kits.remote.peer_copies`), `bytes_needed` (what
        the admitted episodes' frames and rows occupy), `read_amplification` (fetched / needed),
        `cache_bytes_peak` (each process's peak reservation, summed), `network_wait_s` (seconds readers
        blocked on the network, summed over processes); and the time to a first batch's data: `metadata_s`
        (listing, metadata and file indexes, on the host) and `first_admission_s` (from a process's first
        admission until the first piece of each of its ranges was local: what a reader starts on; the slowest
        process)."""
        totals = self.counters.total()
        wait = totals.pop("network_wait_us") / 1e6
        first = int(self.counters.values[:, self.counters.names.index("first_admission_us")].max())
        totals.pop("first_admission_us")
        needed = totals["bytes_needed"]
        amplification = round(totals["bytes_fetched"] / needed, 3) if needed else None
        return {**totals, "read_amplification": amplification, "network_wait_s": round(wait, 3),
                "metadata_s": round(self.metadata_s, 3), "first_admission_s": round(first / 1e6, 3)}


class _ProcessState:
    """What one process holds: its pid, its counter lock, its cache, its metadata filesystem and its first
    admission (key, start time)."""

    def __init__(self, inherited: dict[str, list[Located]]):
        self.pid, self.lock, self.inherited = os.getpid(), threading.Lock(), inherited
        self.cache: PrefetchCache | None = None
        self.settled = False  # a loader settled its admissions: DataLoader workers may read those ranges
        self.meta_fs = None
        self.first: tuple[object, float] | None = None
        self.first_done = False
