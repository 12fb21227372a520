"""One cache of remote files' bytes per host: fixed-size blocks in one folder shared by every process of every run
on the host. A block is `BLOCK_BYTES` of one version of one file, `<folder>/<name>.<n>.blk`, kept as
`dl.kits.lru_folder` keeps files (written under a temporary name and renamed, marked used when read, least recently
used deleted past the limit); one process downloads a block while the others wait on its lock (`filelock`). Each
host evicts only in its own folder (`host-<name>`), so a base several nodes share is never cleaned by another node.
"""

import os
import socket
import threading
import time
from pathlib import Path

from filelock import FileLock

from .. import lru_folder
from ..paths import cache_dir

BLOCK_BYTES = 128 << 10
"""The cache's unit: a keyframe and the first frames of a 640x480 camera (~6 KB a frame) and a 64 KiB read-ahead."""
EVICT_EVERY = 8
"""A process checks the folder's size each time it has written this fraction of the limit."""
TOUCH_S = 30.0
"""A process marks a block it reads as used at most once in this many seconds."""
HOST_ENV = "DL_HOSTNAME"
"""Overrides the host name of the cache's folder (default: `socket.gethostname()`), e.g. where nodes share one."""


def host_name() -> str:
    """`$DL_HOSTNAME`, else `socket.gethostname()`, path separators replaced."""
    return (os.environ.get(HOST_ENV) or socket.gethostname() or "localhost").replace("/", "_").replace(os.sep, "_")


def default_base() -> Path:
    """Where the cache goes unless a source's `cache_dir` says otherwise: node-local storage when the environment
    names it (`$SLURM_TMPDIR`, then `$TMPDIR`, each `.../dl-remote`), else dl's cache folder
    (`dl.kits.paths.cache_dir("remote")`)."""
    for variable in ("SLURM_TMPDIR", "TMPDIR"):
        if os.environ.get(variable):
            return Path(os.environ[variable]) / "dl-remote"
    return cache_dir("remote")


def host_folder(base: str | None) -> Path:
    """This host's folder under `base` (None: `default_base()`): `host-<host_name()>`. Resolved where a source is
    built, so its DataLoader workers (started with another environment, by spawn) use the same one."""
    return (Path(os.path.expanduser(base)) if base else default_base()) / f"host-{host_name()}"


class HostCache:
    """This host's blocks in its `folder` (`host_folder`), at most `limit_bytes` of them."""

    def __init__(self, folder: Path, limit_bytes: int):
        self.dir, self.limit = Path(folder), int(limit_bytes)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._written, self._touched = 0, {}
        self._guard = threading.Lock()

    def path(self, name: str, block: int) -> str:
        return f"{self.dir}/{name}.{block}.blk"

    def get(self, name: str, block: int) -> str | None:
        """The block's file when it is here (marked used), else None."""
        path = self.path(name, block)
        now = time.monotonic()
        if now - self._touched.get(path, -TOUCH_S) >= TOUCH_S:
            lru_folder.touch(path)
            self._touched[path] = now
        return path if os.path.exists(path) else None

    def lock(self, name: str, block: int) -> FileLock:
        """The block's lock (not taken): `acquire(timeout=0)` raises `filelock.Timeout` while another holds it."""
        return FileLock(f"{self.path(name, block)}.lock", thread_local=False, poll_interval=0.005)

    def save(self, name: str, block: int, data) -> None:
        """Write the block (bytes-like) under a temporary name and rename it; evict when due."""
        path = self.path(name, block)
        part = lru_folder.temp_path(path)
        try:
            with open(part, "wb") as out:
                out.write(data)
            os.replace(part, path)
        finally:
            lru_folder.discard(part)
        with self._guard:
            self._written += len(data)
            due = self._written >= self.limit // EVICT_EVERY
            if due:
                self._written = 0
        if due:
            for gone in lru_folder.evict(self.dir, ".blk", self.limit, keep=path):
                lru_folder.discard(f"{gone}.lock")

    def remove(self, name: str, block: int) -> None:
        for path in (self.path(name, block), f"{self.path(name, block)}.lock"):
            lru_folder.discard(path)
