"""`RemoteStore`: every request a remote source makes, in one place: retried (`dl.kits.remote.retry`), counted
(`dl.kits.remote.source_counters`, summed over DataLoader workers) and checked: a range shorter than asked, or past
the end of the file as listed, is an error naming the file (it changed since it was listed), never bytes handed on.
Generic over fsspec filesystems; listings keep each file's size and fingerprint, so `fingerprint` asks nothing.
Nothing here waits at a fork: what a process must not share with a forked child (locks, download threads, HTTP
clients) is each process's own (`dl.kits.process_local`).
"""

import os
import posixpath
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, suppress
from typing import TYPE_CHECKING

from ...contracts.errors import DlError
from ...contracts.source import Source, file_facts
from .retry import Failure, RemoteReadError, RetryPolicy, classify
from .source_counters import STATS_MERGE, SourceCounters

if TYPE_CHECKING:
    import fsspec


STREAM_BLOCK_BYTES = 64 << 10
"""Most bytes of a streamed response body a source hands on at a time (`RemoteStore.stream_range`)."""


class _WriteFailed(DlError):
    """`fetch_into`'s `write` failed (its error is the cause): passed through the retries untouched."""


class RemoteStore(Source):
    """A dataset root (`fs`, `root`, `name`: as `dl.Source`; the bulk files) on a remote fsspec filesystem whose
    every request runs under the policy `retry`, counted; `meta`: `(filesystem, root)` of `meta/` where it lives
    elsewhere (metadata on the Hub, data in a bucket); `pinned`: what `pinned_options()` returns. Reads raise
    `SourceFileNotFoundError` (404: never retried) and `RemoteReadError` (also for a file changed since listed)."""

    stats_merge = STATS_MERGE

    def __init__(self, fs: "fsspec.AbstractFileSystem", root: str, name: str, *,
                 meta: "tuple[fsspec.AbstractFileSystem, str] | None" = None, retry: RetryPolicy | None = None,
                 pinned: dict | None = None):
        super().__init__(fs, root, name)
        self.meta = Source(*meta, name) if meta else None  # its `fs`: this process's metadata filesystem
        if meta:
            self.__dict__["url"] = f"{fs.unstrip_protocol(self.root)} (metadata: {meta[0].unstrip_protocol(meta[1])})"
        self.retry = retry or RetryPolicy()
        self._pinned = dict(pinned or {})
        self.counters = SourceCounters()
        self._sizes: dict[str, int] = {}
        self._facts: dict[str, str] = {}  # fingerprints from listings
        self.metadata_s = 0.0  # seconds spent listing, reading metadata and indexing (host and this process)

    @property
    def fs(self) -> "fsspec.AbstractFileSystem":
        """This process's filesystem for the bulk files (rebuilt after fork, then `_tuned`)."""
        return self._tuned(Source.fs.fget(self))

    def _tuned(self, fs: "fsspec.AbstractFileSystem") -> "fsspec.AbstractFileSystem":
        """`fs` as this source uses it (a source turns off a filesystem's own retries here). Here as it is."""
        return fs

    def _where(self, rel: str) -> tuple["fsspec.AbstractFileSystem", str]:
        """(filesystem, full path) of `rel` (checked by `path`)."""
        full = self.path(rel)
        if self.meta is not None and (rel == "meta" or rel.startswith("meta/")):
            return self._tuned(self.meta.fs), self.meta.root + full[len(self.root):]
        return self.fs, full

    def _call(self, rel: str, request):
        """`request()` under the retry policy, counted."""
        def attempt():
            self.counters.add("requests")
            return request()

        try:
            return self.retry.call(attempt, f"{self.url}/{rel}", self._on_retry)
        except RemoteReadError:
            self.counters.add("failures")
            raise

    def _on_retry(self, failure: Failure) -> None:
        self.counters.add("retries")
        if failure.status == 429:
            self.counters.add("throttled_429")
        elif failure.status is not None and failure.status >= 500:
            self.counters.add("server_errors")

    def _fetch(self, rel: str, start: int | None, end: int | None) -> bytes:
        """Bytes `[start, end)` of `rel` (None: the file's start / end; negative: from the end), one request. Raises
        `RemoteReadError` where fewer bytes come back than a bounded range asks for (the file changed)."""
        if (start is not None and start < 0) or (end is not None and end < 0):
            size = self._size(rel)
            start = None if start is None else (start + size if start < 0 else start)
            end = None if end is None else (end + size if end < 0 else end)
        if start is not None and end is not None and end <= start:
            return b""
        fs, path = self._where(rel)

        def request() -> bytes:
            with closing(self.stream_range(fs, path, start, end)) as blocks:  # closed: its response too
                data = b"".join(blocks)
            return data if end is None else data[:end - (start or 0)]

        with self._past_end(rel, start, end):
            data = self._call(rel, request)
        self.counters.add("bytes_fetched", len(data))
        if end is not None and len(data) != end - (start or 0) and (rel not in self._sizes or end <= self._sizes[rel]):
            raise self._short(rel, start or 0, end, len(data))
        return data

    def fetch_into(self, rel: str, start: int, end: int, write: Callable[[bytes], None]) -> None:
        """Bytes `[start, end)` of `rel` (non-negative offsets) handed to `write` in order as they arrive
        (`stream_range`); a request cut off midway is retried from the first byte not handed on (`write` sees each
        byte once). Raises `RemoteReadError` (the file ends before `end`: it changed; transient errors past the
        budget), `SourceFileNotFoundError`, and whatever `write` raises, as it is (never retried)."""
        fs, path = self._where(rel)
        at = start

        def request() -> None:
            nonlocal at
            with closing(self.stream_range(fs, path, at, end)) as blocks:  # closed: its response too
                for block in blocks:
                    block = block[:end - at]
                    self.counters.add("bytes_fetched", len(block))
                    try:
                        write(block)
                    except Exception as exc:  # the caller's own failure (a full disk): never retried
                        raise _WriteFailed() from exc
                    at += len(block)
                    if at == end:
                        # let the response end, so that its connection is kept alive: httpx hands on a last whole
                        # block before reading the response's end; every byte is in, so an error there is moot
                        with suppress(Exception):
                            next(blocks, None)
                        return
            raise self._short(rel, start, end, at - start)

        if end > start:
            try:
                with self._past_end(rel, start, end):
                    self._call(rel, request)
            except _WriteFailed as exc:
                raise exc.__cause__ from None

    def _short(self, rel: str, start: int, end: int, got: int | None) -> RemoteReadError:
        said = "they lie past its end" if got is None else f"got {got}"
        return RemoteReadError(f"{self.url}/{rel}: asked for bytes {start}-{end} of a file listed at "
                               f"{self._sizes.get(rel, '?')} bytes, {said}: the file changed since it was listed. "
                               "Start the run again to read the new version.")

    @contextmanager
    def _past_end(self, rel: str, start: int | None, end: int | None) -> Iterator[None]:
        """Turns a server's 416 (range not satisfiable) into an error saying the file changed."""
        try:
            yield
        except RemoteReadError as exc:
            if exc.__cause__ is not None and classify(exc.__cause__).status == 416:
                raise self._short(rel, start or 0, end, None) from None
            raise

    def stream_range(self, fs: "fsspec.AbstractFileSystem", path: str, start: int | None, end: int | None
                     ) -> Iterator[bytes]:
        """One request for bytes `[start, end)` of `path` on `fs` (None: from the start, to the end), in blocks as
        they arrive (the caller stops at `end` and checks the length). Here one block (`cat_file`); a source overrides
        it to use a download's first bytes before its last arrive, or to keep a client's own retries out."""
        yield fs.cat_file(path, start=start, end=end)

    def _size(self, rel: str) -> int:
        size = self._sizes.get(rel)
        if size is None:
            size = self._sizes[rel] = int(self._info(rel).get("size") or 0)
        return size

    def _info(self, rel: str) -> dict:
        fs, path = self._where(rel)
        return self._call(rel, lambda: fs.info(path))

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

    def fingerprint(self, rel: str) -> str:
        """The listing's facts of `rel` when it was listed (no request), else one `info` request."""
        facts = self._facts.get(rel)
        return facts if facts is not None else file_facts(self._info(rel))

    def pinned_options(self) -> dict:
        return dict(self._pinned)

    def reset_stats(self) -> None:
        """Zero the counters (the benchmark does after its single-process pass)."""
        self.counters.reset()

    def figures(self, num_workers: int = 0, batch_size: int = 1) -> dict:
        """The counters summed over this process and its DataLoader workers since the last reset, and the seconds
        spent on metadata (`dl.kits.remote.source_counters.SourceCounters.report` lists every figure)."""
        return self.counters.report(self.metadata_s)
