"""A folder of derived files shared by processes, nodes and runs (dl's cache folder is often a shared home on
a cluster): each file written under a unique temporary name and renamed into place, so concurrent writers of
the same file never leave a torn one; every use touches the file; and the folder is kept under a byte limit
by deleting the least recently used files first.

A file deleted while another process has it open or memory-mapped stays readable by that process (POSIX
unlink semantics; NFS renames it aside until closed), so eviction never breaks a reader that already opened
its file; a reader that finds its file gone rebuilds it.
"""

import os
import socket
import time
import uuid
import warnings
from pathlib import Path

STALE_TEMP_S = 24 * 3600
"""A temporary file this old belongs to a writer that died (writes take minutes at most): eviction removes it."""


def temp_path(path: str | os.PathLike) -> str:
    """A temporary name beside `path` that no other writer (process, thread or node) uses:
    `PATH.HOST-PID-RANDOM.tmp`."""
    return f"{path}.{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"


def touch(path: str | os.PathLike) -> None:
    """Mark `path` as used now (its modification time orders eviction); a file gone meanwhile is ignored."""
    try:
        os.utime(path)
    except FileNotFoundError:
        pass


def evict(folder: str | os.PathLike, suffix: str, limit_bytes: int, keep: str | os.PathLike) -> list[str]:
    """Delete the least recently used `*suffix` files of `folder` until their total is at most `limit_bytes`,
    never `keep` (the file the caller is about to use), and remove temporary files older than `STALE_TEMP_S`.
    Warns when `keep` alone exceeds the limit. Files that vanish meanwhile (another process evicting) are
    skipped. Returns the deleted paths."""
    now, entries = time.time(), []
    for entry in os.scandir(folder):
        try:
            stat = entry.stat()
        except FileNotFoundError:
            continue
        if entry.name.endswith(".tmp"):
            if now - stat.st_mtime > STALE_TEMP_S:
                discard(entry.path)
        elif entry.name.endswith(suffix):
            entries.append((stat.st_mtime, stat.st_size, entry.path))
    keep = os.path.abspath(keep)
    total = sum(size for _, size, _ in entries)
    deleted = []
    for _, size, path in sorted(entries):
        if total <= limit_bytes:
            break
        if os.path.abspath(path) == keep:
            continue
        if discard(path):
            deleted.append(path)
        total -= size
    if total > limit_bytes:
        size = Path(keep).stat().st_size if Path(keep).exists() else 0
        warnings.warn(f"{keep} alone holds {size / 1e6:.1f} MB, more than the {limit_bytes / 1e6:.1f} MB its cache "
                      f"folder {folder} may hold; it is kept while in use. Raise the limit to keep more.",
                      stacklevel=2)
    return deleted


def discard(path: str) -> bool:
    """Delete `path` if it exists; whether this call deleted it."""
    try:
        os.remove(path)
        return True
    except FileNotFoundError:
        return False
