"""`RemoteSource`: the one wrapper every remote read of a source goes through.

Generic over fsspec filesystems (S3, GCS, the Hugging Face Hub, HTTP, memory...): the `hub` and `bucket`
plugins build one. It adds, in one place:

- retries: every request (listing, file facts, byte range) runs under a `dl.kits.remote.retry.RetryPolicy`, which
  retries transient errors with backoff and raises a clear error naming the URL when it gives up;
- counters: requests, bytes fetched, retries, 429s, failures, cache hits, the bytes the admitted episodes
  need (read amplification = fetched / needed), the peak bytes the cache reserved and the seconds readers
  waited on the network, summed over DataLoader workers (`dl.dataloader.shared_counters.SharedCounters`); it is
  `dl.ReportsStats`, so `dl run` reports them as `source_stats`;
- prefetch: on `admit` the episode's files start downloading into a `dl.kits.remote.file_cache.PrefetchCache` (one per
  reading process, byte-bounded, reference-counted), so decoders and parquet reads use local files;
  `release` frees them. Reads of files not (yet) cached stream through a buffered ranged-read file.
"""

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
from .file_cache import PrefetchCache, default_base
from .retry import Failure, RemoteReadError, RetryPolicy

if TYPE_CHECKING:
    import fsspec

COUNTERS = ("requests", "bytes_fetched", "retries", "throttled_429", "server_errors", "failures", "cache_hits",
            "remote_reads", "files_prefetched", "bytes_prefetched", "bytes_needed", "cache_bytes_peak",
            "network_wait_us")
CHUNK_BYTES = 8 << 20
"""Whole-file downloads go in ranges of this size, so a reset mid-file costs one range, not the file."""


class RemoteSource(Source):
    """A dataset root on a remote fsspec filesystem, read with retries, counters and prefetch.

    Args:
        fs, root, name: as `dl.Source` (the bulk files: data and videos).
        url: the dataset's URL for messages, results and cache keys (default: `fs.unstrip_protocol(root)`).
        meta_fs, meta_root: where `meta/` lives when it is elsewhere (metadata on the Hub, data in a bucket).
        retry: the retry policy of every request.
        prefetch: download admitted episodes' files in the background (else every read streams).
        cache_bytes: the cache's byte limit for the whole DataLoader (each of N workers gets 1/N).
        cache_dir: the folder of the cache's run folders (None: `dl.kits.remote.file_cache.default_base()`,
            node-local storage first), resolved in each reading process (on its node).
        prefetch_threads: download threads per reading process.
        block_size: read-ahead of streamed reads, bytes (one request per block).
        pinned: what `pinned_options()` returns.
        fs_settings: `{filesystem class name: {attribute: value}}` set on each process's filesystem instances
            (e.g. s3fs's own `retries` attribute, which its constructor does not take).

    Raises (from reads): `SourceFileNotFoundError` (404: never retried), `dl.kits.remote.retry.RemoteReadError`.
    """

    stats_merge = dict.fromkeys(COUNTERS, "sum") | {"read_amplification": "mean", "network_wait_s": "max"}

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
        self._proc: _ProcessState | None = None
        self._inherit: dict[str, str] = {}

    def __getstate__(self):
        state = self.__dict__.copy()
        proc = state.pop("_proc")
        state["_proc"] = None
        if proc is not None and proc.cache is not None and proc.settled:  # spawned children read these too
            state["_inherit"] = proc.cache.ready_files()
        return state

    # ------------------------------------------------------------------------------------ per process
    def _state(self) -> "_ProcessState":
        proc = self._proc
        if proc is None or proc.pid != os.getpid():
            inherited = dict(self._inherit)
            if proc is not None and proc.cache is not None and proc.settled:  # forked after `settle()`
                inherited.update(proc.cache.ready_files())
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
                                       inherited=proc.inherited)
        return proc.cache

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
        """Bytes `[start, end)` of `rel` (None: the file's start / end; negative: from the end), one request."""
        if (start is not None and start < 0) or (end is not None and end < 0):
            size = self._size(rel)
            start = None if start is None else (start + size if start < 0 else start)
            end = None if end is None else (end + size if end < 0 else end)
        if start is not None and end is not None and end <= start:
            return b""
        fs, path = self._where(rel)
        data = self._call(rel, lambda: self.request_range(fs, path, start, end))
        self._count("bytes_fetched", len(data))
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

    # ------------------------------------------------------------------------------------ the Source API
    def list_files(self, folder: str) -> dict[str, int]:
        """As `Source.list_files`, retried and counted; the sizes are kept for later reads."""
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
        self._sizes.update(out)
        return dict(sorted(out.items()))

    def open(self, rel: str) -> BinaryIO:
        """A local cached copy when `rel` was admitted (waiting for its download), else a seekable file
        streaming `block_size` ranges."""
        local = self._local(rel)
        return open(local, "rb") if local is not None else self._stream(rel)

    def _stream(self, rel: str) -> BinaryIO:
        size = self._size(rel)  # also raises SourceFileNotFoundError for a missing file
        return io.BufferedReader(_RangeReader(self, rel, size), buffer_size=self.block_size)

    def read_bytes(self, rel: str, start: int | None = None, end: int | None = None) -> bytes:
        local = self._local(rel)
        if local is None:
            t0 = time.perf_counter()
            try:
                return self._fetch(rel, start, end)
            finally:
                self._count("network_wait_us", int((time.perf_counter() - t0) * 1e6))
        return fsspec.filesystem("file").cat_file(local, start=start, end=end)  # only the range, not the file

    def fingerprint(self, rel: str) -> str:
        return file_facts(self._info(rel))

    def video_input(self, rel: str) -> str | BinaryIO:
        """The cached local path when `rel` was admitted (after its download), else a streaming file."""
        local = self._local(rel)
        return local if local is not None else self._stream(rel)

    def admit(self, key: object, files: list[FileSpan]) -> None:
        """Count what `key` needs and, with prefetch, queue its files for download (never blocks).

        Raises:
            dl.kits.remote.file_cache.CacheLimitError: the files do not fit in the cache at all.
        """
        sizes = {}
        for span in files:
            size = span.size if span.size is not None else self._size(span.path)
            self._sizes.setdefault(span.path, size)
            sizes[span.path] = size
            whole = size if span.start is None and span.end is None else (span.end or size) - (span.start or 0)
            self._count("bytes_needed", int(whole * span.share))
        if self.prefetch:
            self._cache().admit(key, sizes)

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

    def _local(self, rel: str) -> str | None:
        """A local copy of `rel` (waiting for a download in flight), or None to read remotely."""
        self.path(rel)  # refuse unsafe paths before anything else
        proc = self._state()
        if not self.prefetch and not proc.inherited:
            self._count("remote_reads")
            return None
        cache = self._cache() if self.prefetch else None
        t0 = time.perf_counter()
        if cache is not None:
            local = cache.local_path(rel)
        else:
            path = proc.inherited.get(rel)
            local = path if path is not None and os.path.exists(path) else None
        waited = time.perf_counter() - t0
        if waited > 1e-3:
            self._count("network_wait_us", int(waited * 1e6))
        self._count("cache_hits" if local is not None else "remote_reads")
        return local

    def _download(self, rel: str, size: int, out: BinaryIO) -> None:
        """The whole of `rel` into `out`, in `CHUNK_BYTES` ranges (each retried on its own)."""
        if size == 0:
            out.write(self._fetch(rel, None, None))
        for start in range(0, size, CHUNK_BYTES):
            data = self._fetch(rel, start, min(start + CHUNK_BYTES, size))
            if len(data) != min(CHUNK_BYTES, size - start):
                raise RemoteReadError(f"{self.url}/{rel}: asked for bytes {start}-{min(start + CHUNK_BYTES, size)} "
                                      f"of a {size}-byte file, got {len(data)}; the file changed while reading.")
            out.write(data)
        self._count("files_prefetched")
        self._count("bytes_prefetched", size)

    # ------------------------------------------------------------------------------------ ReportsStats
    def reset_stats(self) -> None:
        """Zero the counters (the benchmark does after its single-process pass)."""
        self.counters.reset()

    def stats(self, num_workers: int = 0, batch_size: int = 1) -> dict:
        """Counters summed over this process and its DataLoader workers since the last reset:
        `requests`, `bytes_fetched`, `retries` (of which `throttled_429` and `server_errors`), `failures`
        (requests given up), `cache_hits` / `remote_reads` (file reads served locally / remotely),
        `files_prefetched`, `bytes_prefetched`, `bytes_needed` (what the admitted episodes' samples use),
        `read_amplification` (fetched / needed), `cache_bytes_peak` (each process's peak reservation,
        summed), `network_wait_s` (seconds readers blocked on the network, summed over processes)."""
        totals = self.counters.total()
        wait = totals.pop("network_wait_us") / 1e6
        needed = totals["bytes_needed"]
        amplification = round(totals["bytes_fetched"] / needed, 3) if needed else None
        return {**totals, "read_amplification": amplification, "network_wait_s": round(wait, 3)}


class _ProcessState:
    """What one process holds: its pid, its counter lock, its cache and its metadata filesystem."""

    def __init__(self, inherited: dict[str, str]):
        self.pid, self.lock, self.inherited = os.getpid(), threading.Lock(), inherited
        self.cache: PrefetchCache | None = None
        self.settled = False  # a loader settled its admissions: DataLoader workers may read those files
        self.meta_fs = None


class _RangeReader(io.RawIOBase):
    """A seekable raw file over a remote file: each `readinto` is one ranged request through the source."""

    def __init__(self, source: RemoteSource, rel: str, size: int):
        self.source, self.rel, self.size, self.pos = source, rel, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.size - self.pos)
        if n <= 0:
            return 0
        t0 = time.perf_counter()
        data = self.source._fetch(self.rel, self.pos, self.pos + n)
        self.source._count("network_wait_us", int((time.perf_counter() - t0) * 1e6))
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)

