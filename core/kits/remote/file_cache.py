"""A byte-bounded, reference-counted local cache of remote files, filled by background download threads.

Generic (knows nothing of datasets): `dl.kits.remote.source.RemoteSource` keeps one per reading process and
fills it on the admission signal (`Source.admit` / `release`). Several keys (episodes) may hold one file,
as LeRobot v3.0 packs several episodes per data and video file; a file is deleted when the last key
holding it is released. Admission never blocks the caller: files wait in line (first come, first served)
until the byte limit lets them in, and a reader that needs a file still waiting for room gets `None` and
reads it remotely instead, so a full cache slows reads down but can never deadlock a loader that admits
its next episode before releasing the last one. One key needing more bytes than the whole limit is an
error that says so.

Each process caches into its own run-scoped folder `run-<host>-<pid>-<start time>` under the cache's base
folder (`default_base()`: node-local storage first, `$SLURM_TMPDIR`, then `$TMPDIR`, else dl's cache folder;
a source's `cache_dir` option chooses another), removed when the process exits (also in DataLoader workers)
and, after a crash, by the next process on the same host that starts a cache. The host is part of the name
because the base may be a folder several nodes share (a home directory on a cluster): a process checks only
its own host's folders for dead pids, never another node's live downloads.
"""

import enum
import glob
import hashlib
import os
import shutil
import socket
import threading
from collections import deque
from collections.abc import Callable
from multiprocessing.util import Finalize
from pathlib import Path
from typing import BinaryIO

import psutil

from ...contracts.errors import DlError
from ..paths import cache_dir

Download = Callable[[str, int, BinaryIO], None]
"""`download(rel, size, out)`: write the whole remote file `rel` (`size` bytes) into `out`; raises on failure."""


class CacheLimitError(DlError):
    """What a key needs cannot fit in the cache's byte limit."""


class State(enum.Enum):
    WAITING = "waiting for room"
    QUEUED = "queued"
    LOADING = "downloading"
    READY = "ready"
    FAILED = "failed"


class _Entry:
    __slots__ = ("rel", "size", "keys", "state", "done", "error", "path")

    def __init__(self, rel: str, size: int, path: str):
        self.rel, self.size, self.path = rel, size, path
        self.keys: set = set()
        self.state = State.WAITING
        self.done = threading.Event()
        self.error: BaseException | None = None


class PrefetchCache:
    """Local copies of remote files for one process.

    Args:
        base: the folder holding every process's run folder (e.g. `default_base()`).
        limit_bytes: the most bytes reserved at once (files waiting for room do not count).
        download: fetches a file (see `Download`); it does its own retries.
        threads: background download threads (started on the first admission).
        on_reserved: called with the reserved bytes whenever they change (a peak counter).
        inherited: `{rel: local path}` of files a parent process had ready when this one forked: read
            when still present, never deleted by this process.
    """

    def __init__(self, base: Path, limit_bytes: int, download: Download, threads: int = 4,
                 on_reserved: Callable[[int], None] | None = None, inherited: dict[str, str] | None = None):
        if limit_bytes < 1:
            raise DlError(f"cache limit must be >= 1 byte, got {limit_bytes}.")
        self.base, self.limit, self.download, self.threads = Path(base), int(limit_bytes), download, max(1, threads)
        self.on_reserved = on_reserved or (lambda n: None)
        self.inherited = dict(inherited or {})
        self.reserved = 0
        self._entries: dict[str, _Entry] = {}
        self._held: dict[object, set[str]] = {}
        self._waiting: deque[str] = deque()
        self._queued: deque[str] = deque()
        self._cond = threading.Condition()
        self._workers: list[threading.Thread] = []
        self._copies = 0  # numbers each local copy, so a re-admitted file never shares a path with one in flight
        self._closed = False
        self.dir: Path | None = None

    # ------------------------------------------------------------------------------------ admission
    def admit(self, key: object, files: dict[str, int]) -> None:
        """`key` will read `files` (`{rel: size in bytes}`): download those not held yet, as room allows.

        Raises:
            CacheLimitError: the files `key` needs, beyond those already held, exceed the limit.
        """
        with self._cond:
            new = {rel: size for rel, size in files.items() if rel not in self._entries}
            if sum(new.values()) > self.limit:
                raise CacheLimitError(
                    f"episode {key} needs {_mb(sum(new.values()))} of files ({', '.join(sorted(new))}) but the "
                    f"local cache holds at most {_mb(self.limit)} in this process; raise the source option "
                    "cache_bytes, or set prefetch=false to stream reads without a cache.")
            self._start()
            held = self._held.setdefault(key, set())
            for rel, size in files.items():
                entry = self._entries.get(rel)
                if entry is None:
                    self._copies += 1
                    name = f"{hashlib.sha1(rel.encode()).hexdigest()[:20]}-{self._copies}{os.path.splitext(rel)[1]}"
                    entry = self._entries[rel] = _Entry(rel, int(size), str(self.dir / name))
                    self._waiting.append(rel)
                entry.keys.add(key)
                held.add(rel)
            self._grant()

    def release(self, key: object) -> None:
        """`key` is done: files no other key holds are deleted (or dropped from the line)."""
        with self._cond:
            for rel in self._held.pop(key, ()):
                entry = self._entries[rel]
                entry.keys.discard(key)
                if not entry.keys:
                    self._drop(entry)
            self._grant()

    def _drop(self, entry: _Entry) -> None:
        del self._entries[entry.rel]
        if entry.state is State.WAITING:
            self._waiting.remove(entry.rel)
            return
        if entry.state is State.QUEUED:
            self._queued.remove(entry.rel)
        if entry.state in (State.QUEUED, State.READY):  # a download in flight cleans up after itself
            _remove(entry.path)
            self._unreserve(entry.size)

    def _grant(self) -> None:
        """Let waiting files in, in order, while they fit (called with the lock held)."""
        while self._waiting:
            entry = self._entries[self._waiting[0]]
            if self.reserved + entry.size > self.limit:
                break
            self._waiting.popleft()
            entry.state = State.QUEUED
            self._queued.append(entry.rel)
            self.reserved += entry.size
            self.on_reserved(self.reserved)
        self._cond.notify_all()

    def _unreserve(self, size: int) -> None:
        self.reserved -= size
        self.on_reserved(self.reserved)

    # ------------------------------------------------------------------------------------ reads
    def local_path(self, rel: str) -> str | None:
        """A local copy of `rel` to read: waits for its download when one is queued or running (taking a
        queued one over in this thread), and returns None when the file is not admitted or still waits
        for room (read it remotely then).

        Raises:
            The download's own error (e.g. `SourceFileNotFoundError`, `dl.kits.remote.retry.RemoteReadError`).
        """
        with self._cond:
            entry = self._entries.get(rel)
            if entry is None:
                path = self.inherited.get(rel)
                return path if path is not None and os.path.exists(path) else None
            if entry.state is State.WAITING:
                return None
            claimed = entry.state is State.QUEUED
            if claimed:
                self._queued.remove(rel)
                entry.state = State.LOADING
        if claimed:
            self._fetch(entry)
        entry.done.wait()
        if entry.state is State.FAILED:
            raise entry.error
        return entry.path

    def settle(self) -> None:
        """Block until every admitted file is downloaded.

        Raises:
            CacheLimitError: files wait for room that no release will free (the admitted keys need more
                than the limit together). A download's own error.
        """
        with self._cond:
            while True:
                failed = next((e for e in self._entries.values() if e.state is State.FAILED), None)
                if failed is not None:
                    raise failed.error
                busy = [e for e in self._entries.values() if e.state in (State.QUEUED, State.LOADING)]
                if self._waiting and not busy:
                    need = sum(e.size for e in self._entries.values())
                    raise CacheLimitError(
                        f"the admitted episodes need {_mb(need)} of files together, more than the local cache's "
                        f"{_mb(self.limit)}; raise the source option cache_bytes, select fewer episodes, or set "
                        "prefetch=false to stream reads without a cache.")
                if not busy:
                    return
                self._cond.wait(timeout=1.0)

    # ------------------------------------------------------------------------------------ downloads
    def _start(self) -> None:
        if self.dir is None:
            self.dir = _run_dir(self.base)
            Finalize(self, shutil.rmtree, args=(str(self.dir),), kwargs={"ignore_errors": True}, exitpriority=10)
        while len(self._workers) < self.threads:
            worker = threading.Thread(target=self._work, name=f"dl-prefetch-{len(self._workers)}", daemon=True)
            worker.start()
            self._workers.append(worker)

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queued and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                entry = self._entries[self._queued.popleft()]
                entry.state = State.LOADING
            self._fetch(entry)

    def _fetch(self, entry: _Entry) -> None:
        part = f"{entry.path}.part"
        try:
            with open(part, "wb") as out:
                self.download(entry.rel, entry.size, out)
            os.replace(part, entry.path)
            state, error = State.READY, None
        except BaseException as exc:  # handed to every reader of this file
            _remove(part)
            state, error = State.FAILED, exc
        with self._cond:
            entry.state, entry.error = state, error
            if self._entries.get(entry.rel) is not entry:  # released while downloading
                _remove(entry.path)
                self._unreserve(entry.size)
            elif state is State.FAILED:
                self._unreserve(entry.size)
            entry.done.set()
            self._grant()

    def ready_files(self) -> dict[str, str]:
        """`{rel: local path}` of the files downloaded and present now (handed to forked children)."""
        with self._cond:
            ready = {e.rel: e.path for e in self._entries.values() if e.state is State.READY}
        return {**{r: p for r, p in self.inherited.items() if os.path.exists(p)}, **ready}

    def close(self) -> None:
        """Stop the download threads, waiting for their current file, and delete this process's folder."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for worker in self._workers:
            worker.join()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)


HOST_ENV = "DL_HOSTNAME"
"""Overrides the host name in run folders (default: `socket.gethostname()`), e.g. where nodes share a name."""


def host_name() -> str:
    """This machine's name as run folders carry it: `$DL_HOSTNAME`, else `socket.gethostname()`, with path
    separators replaced."""
    return (os.environ.get(HOST_ENV) or socket.gethostname() or "localhost").replace("/", "_").replace(os.sep, "_")


def default_base() -> Path:
    """Where run folders go unless a source's `cache_dir` says otherwise: node-local storage when the
    environment names it (`$SLURM_TMPDIR`, then `$TMPDIR`, each `.../dl-remote`), else dl's cache folder
    (`dl.kits.paths.cache_dir("remote")`, often a home directory nodes share)."""
    for variable in ("SLURM_TMPDIR", "TMPDIR"):
        if os.environ.get(variable):
            return Path(os.environ[variable]) / "dl-remote"
    return cache_dir("remote")


def _run_dir(base: Path) -> Path:
    """This process's run folder `run-<host>-<pid>-<start time>`, after removing this host's folders of processes
    that are gone (crashed runs). Folders of other hosts, and of names it cannot read, are left alone."""
    base.mkdir(parents=True, exist_ok=True)
    host = host_name()
    for old in base.glob(f"run-{glob.escape(host)}-*"):
        try:
            owner, pid, started = old.name.rsplit("-", 2)
            pid, started = int(pid), int(started)
        except ValueError:
            continue
        if owner != f"run-{host}":
            continue
        try:
            alive = psutil.pid_exists(pid) and int(psutil.Process(pid).create_time()) == started
        except psutil.Error:
            alive = False
        if not alive:
            shutil.rmtree(old, ignore_errors=True)
    me = psutil.Process()
    path = base / f"run-{host}-{me.pid}-{int(me.create_time())}"
    path.mkdir(exist_ok=True)
    return path


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"
