"""Byte ranges other processes on this host have downloaded already: a node-wide view of the remote caches.

Every process of a run (the host, each DataLoader worker, every rank on the node) keeps its own
`dl.kits.remote.file_cache.PrefetchCache` in its own run folder. A range it downloads of a shared file (one whose
version is known: the cache's `shared` name) goes to `<run folder>/<shared name>/<start>-<end>.<copy>`, written
under a temporary name and renamed once whole, so another process listing that folder sees only whole ranges.
A cache cuts the ranges it admits at the bounds of the files this host's other run folders hold (`bounds`); a range
one of them holds whole becomes a hard link to it (`link`: no byte copied, no second copy on disk), and every other
download goes through `PeerCopies.fill`: the bytes those files cover are copied locally, only the rest is fetched.
Without it, a later epoch that deals an episode to another worker, the workers that follow the host's own pass, and
every rank of a node fetch the same bytes again.

A peer's file may be deleted at any moment (its range released or evicted, its process gone): a file gone when
opened is downloaded instead, and an open file stays readable after its name goes. Only this host's folders
are read: the base folder may be shared by nodes, where a file another node writes is not guaranteed whole; and
only this user's: in a folder users share (`/tmp`), another user could plant bytes under a file's name.
"""

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from .run_folders import host_runs

LIST_TTL_S = 0.5
"""How long a listing of the peers' ranges of one file is reused before it is read again (a range a peer finished
since is missed for at most this long: the caller downloads it)."""
COPY_BYTES = 1 << 20


def range_name(start: int, end: int, copy: int) -> str:
    """The file name of bytes `[start, end)` in a shared file's folder (`copy` keeps names of re-admitted ranges
    apart)."""
    return f"{start}-{end}.{copy}"


def _parse(name: str) -> tuple[int, int] | None:
    """`(start, end)` of a complete range's file name, None for anything else (a download in progress)."""
    span, dot, copy = name.partition(".")
    start, dash, end = span.partition("-")
    if not (dot and dash and copy.isdigit() and start.isdigit() and end.isdigit()):
        return None
    return int(start), int(end)


class PeerCopies:
    """The ranges this host's other run folders under `base` hold, copied on request.

    Args:
        base: the folder of every cache's run folder.
        own: this cache's run folder (never read as a peer).
    """

    def __init__(self, base: Path, own: Path):
        self.base, self.own = Path(base), Path(own)
        self._lock = threading.Lock()
        self._listed: dict[str, tuple[float, list[tuple[int, int, str]]]] = {}
        self._links = True  # False once a hard link failed for another reason than a file gone

    def _ranges(self, name: str) -> list[tuple[int, int, str]]:
        """`(start, end, path)` of the complete ranges of the shared file `name` in peers' folders (a listing
        at most `LIST_TTL_S` old)."""
        now = time.monotonic()
        with self._lock:
            listed = self._listed.get(name)
        if listed is not None and now - listed[0] < LIST_TTL_S:
            return listed[1]
        out = []
        for run in host_runs(self.base):
            try:
                if run == self.own or run.stat().st_uid != os.getuid():  # another user's files are not trusted
                    continue
                entries = list(os.scandir(run / name))
            except OSError:  # no such folder, or its process removed it just now
                continue
            out += [(*span, entry.path) for entry in entries if (span := _parse(entry.name)) is not None]
        out.sort()
        with self._lock:
            self._listed[name] = (now, out)
        return out

    def fill(self, name: str, start: int, end: int, out: BinaryIO, download: Callable[[int, int], None]) -> int:
        """Write bytes `[start, end)` of the shared file `name` into `out`, in order: the parts peers' ranges
        cover copied from them, the rest by `download(lo, hi)` (which writes bytes `[lo, hi)` into `out`).
        Returns the bytes copied. A peer's file gone before it was opened is downloaded instead.

        Raises:
            What `download` raises.
        """
        copied, pos = 0, start
        for lo, hi, offset, path in self._cover(name, start, end):
            if lo > pos:
                download(pos, lo)
            if self._copy(name, path, offset, hi - lo, out):
                copied += hi - lo
            else:
                download(lo, hi)
            pos = hi
        if pos < end:
            download(pos, end)
        return copied

    def bounds(self, name: str, start: int, end: int) -> list[tuple[int, int]]:
        """`(lo, hi)` of the parts of `[start, end)` of the shared file `name` that one peer's file each holds
        (ascending, disjoint; as listed at most `LIST_TTL_S` ago): where a cache cuts its ranges so that each one
        a peer holds can be linked (`link`)."""
        return [(lo, hi) for lo, hi, _, _ in self._cover(name, start, end)]

    def link(self, name: str, start: int, end: int, folder: Path, copy: int) -> tuple[str, int] | None:
        """A hard link in `folder` to a peer's file holding every byte of `[start, end)` of the shared file `name`
        (no byte copied: the link keeps the bytes when the peer deletes its file), named after the range that file
        holds (`range_name(..., copy)`, so other caches find it too): `(its path, the offset of byte start in it)`.
        None when no single peer's file holds the bytes, or the link cannot be made (the file went just now, or
        the filesystem has no hard links): copy or download them then."""
        if not self._links:
            return None
        cover = self._cover(name, start, end)
        if len(cover) != 1 or cover[0][:2] != (start, end):
            return None
        _, _, offset, path = cover[0]
        first, last = _parse(os.path.basename(path))
        target = folder / range_name(first, last, copy)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            os.link(path, target)
        except FileNotFoundError:  # released by its process just now: list again next time
            with self._lock:
                self._listed.pop(name, None)
            return None
        except OSError:  # no hard links here (another filesystem, or one without them): copy from now on
            self._links = False
            return None
        return str(target), offset

    def covers(self, name: str, start: int, end: int) -> bool:
        """Whether peers' complete ranges of the shared file `name` hold every byte of `[start, end)` (as listed
        at most `LIST_TTL_S` ago: a copy may still find one gone, and download it)."""
        pos = start
        for lo, hi, _, _ in self._cover(name, start, end):
            if lo > pos:
                return False
            pos = hi
        return pos >= end

    def _cover(self, name: str, start: int, end: int) -> list[tuple[int, int, int, str]]:
        """`(lo, hi, offset in the file, path)` of peers' files covering parts of `[start, end)`, ascending and
        disjoint."""
        out, pos = [], start
        for a, b, path in self._ranges(name):
            if a >= end:
                break
            if b > pos:
                lo, hi = max(a, pos), min(b, end)
                out.append((lo, hi, lo - a, path))
                pos = hi
        return out

    def _copy(self, name: str, path: str, offset: int, size: int, out: BinaryIO) -> bool:
        """Bytes `[offset, offset + size)` of the peer's file `path` into `out`; False, with nothing written,
        when the file is gone or shorter."""
        origin = out.tell()
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                left = size
                while left:
                    data = f.read(min(left, COPY_BYTES))
                    if not data:
                        raise OSError(f"{path} is shorter than its name says")
                    out.write(data)
                    left -= len(data)
            return True
        except OSError:  # released by its process just now (or never whole): list again next time
            out.seek(origin)
            out.truncate()
            with self._lock:
                self._listed.pop(name, None)
            return False
