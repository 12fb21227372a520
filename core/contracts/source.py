"""The source contract: where a dataset's files live, and the one read path every byte dl reads takes.

Metadata (`meta/info.json`, `meta/episodes/`, `meta/tasks.parquet`, `meta/stats.json`), data parquet and
video all go through a `Source`'s few methods: list (`list_files`), stat (`fingerprint`), `open` and
`read_bytes`. A source that can fetch ahead of the reads (a remote one) also implements `Prefetches`, which
loaders and the benchmark look for with `isinstance`; a local or archive source never sees it.
"""

import errno
import os
import posixpath
import stat
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, BinaryIO, Protocol, runtime_checkable

from .errors import SourceFileNotFoundError, UnsafePathError

if TYPE_CHECKING:
    import fsspec

    from .needs import DataLoaderNeeds


@dataclass(frozen=True)
class FileSpan:
    """What of one file an episode needs: `path` relative to the root, `[start, end)` in bytes, or the
    whole file when both are None. `size` is the whole file's size in bytes when the caller knows it (from
    `DatasetMeta.files`; saves a remote source a request) and `share` the fraction of the file the episode's
    samples use (v3.0 packs several episodes per file), for read-amplification figures only.

    A source that reads byte ranges narrows a whole-file span by what it says of the file's content:
    `from_timestamp` / `to_timestamp` (seconds on a video's timeline: the frames shown in that span, as
    meta/episodes gives them) or `episode` (a data file's rows of that episode_index).

    `reads` says in which order a loader reads a video span, when it knows: `(first, last, rank)`, each a decode
    of the file's frames at positions `first..last` (inclusive, in presentation order as `dl.format.frame_times`
    lists them; e.g. the pool's chunks of frames, ranked in the order it will first draw them); a source that
    prefetches fetches the bytes of rank 0 reads (of every admitted episode) before those of rank 1, and so on, and
    the bytes no read names last.
    Empty: read from the span's start."""

    path: str
    start: int | None = None
    end: int | None = None
    size: int | None = None
    share: float = 1.0
    from_timestamp: float | None = None
    to_timestamp: float | None = None
    episode: int | None = None
    reads: tuple[tuple[int, int, int], ...] = ()


@runtime_checkable
class Prefetches(Protocol):
    """What a source that fetches ahead of the reads adds to `Source` (dl's `hub` and `bucket`). A loader checks
    `isinstance(meta.source, Prefetches)` and then tells it, in the process that builds the loader (the host),
    every span the run reads (`prepare`), and, in the process that reads, which spans it opens and leaves
    (`admit` / `release`). `state` / `restore` carry what `prepare` learnt to other processes of the run (ranks,
    through `DatasetMeta.to_snapshot`)."""

    def prepare(self, files: list[FileSpan]) -> int:
        """The run will read `files` (every selected episode's spans): read each file's index now (an MP4's
        `moov`, a parquet footer), once, on the host. Returns the bytes the spans need from the store."""

    def admit(self, key: object, files: list[FileSpan], wait: bool = False) -> None:
        """A loader will soon read `files` for `key` (an episode index): start fetching them (`wait`: return once
        they are local)."""

    def release(self, key: object, drop: bool = False) -> None:
        """The loader is done with `key`'s files (`drop`: their local copies go now, e.g. after a measurement that
        must not warm what follows)."""

    def state(self) -> dict:
        """What `prepare` learnt (file indexes, listing facts), JSON-ready."""

    def restore(self, state: dict) -> None:
        """Take back `state()` from another process of this run."""


class Source:
    """A LeRobot v3.0 dataset root on an fsspec filesystem.

    Args:
        fs: the filesystem (e.g. `fsspec.filesystem("file")`).
        root: the dataset root on `fs` (a path, without protocol).
        name: the plugin name that built it, for messages and results.

    Paths given to the methods are relative to the root, with "/" separators, as in info.json; one that
    is absolute or climbs out of the root with `..` raises `UnsafePathError`. The root is trusted: a
    symbolic link inside it is followed wherever it points. The filesystem is rebuilt once in each forked
    process (DataLoader workers): an instance inherited across fork may share open files or connections
    with its parent, and interleaved reads corrupt each other.
    """

    def __init__(self, fs: "fsspec.AbstractFileSystem", root: str, name: str):
        self.root, self.name = root.rstrip("/"), name
        self._fs, self._pid = fs, os.getpid()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    @property
    def fs(self) -> "fsspec.AbstractFileSystem":
        """This process's filesystem instance."""
        if self._pid != os.getpid():
            # fsspec's instance cache is per process, so this makes a fresh instance after fork. The parent's stays
            # referenced: collected here, an async filesystem's (s3fs) finalizer would wait on the parent's event
            # loop, which no thread of this process runs
            self._inherited_fs = self._fs
            self._fs, self._pid = type(self._fs)(*self._fs.storage_args, **self._fs.storage_options), os.getpid()
        return self._fs

    @cached_property
    def url(self) -> str:
        """The root as a URL (`protocol://root`): names the dataset in messages, results and cache keys
        (computed once: decoders key their cache on it per sample). Sources whose filesystem wraps another
        (archives) override it to include what they wrap."""
        return self.fs.unstrip_protocol(self.root)

    @property
    def is_local(self) -> bool:
        """Whether files are plain local paths (decoders may then open them by path)."""
        from fsspec.implementations.local import LocalFileSystem

        return isinstance(self.fs, LocalFileSystem)

    def path(self, rel: str) -> str:
        """The full path of `rel` on `fs`.

        Raises:
            UnsafePathError: `rel` is absolute or leaves the root (`..`), e.g. from an info.json template.
        """
        clean = posixpath.normpath(rel.replace("\\", "/"))
        if rel.startswith(("/", "\\")) or clean == ".." or clean.startswith("../") or ":" in clean.split("/")[0]:
            raise UnsafePathError(f"{rel!r} escapes the dataset root {self.url}: dl reads only files under the "
                                  "root. Fix the path (or the info.json template it came from).")
        return posixpath.join(self.root, clean) if clean != "." else self.root

    def list_files(self, folder: str) -> dict[str, int]:
        """Every file under `folder` (recursively), as `{path relative to the root: size in bytes}`, sorted.
        One listing request per call; a missing folder lists as `{}`. `DatasetMeta.load` lists each top
        folder once per run and keeps the result, so loaders never list again. On local disk symbolic links
        are followed, folders included (fsspec's listing does not descend into a linked folder and types a
        linked file "other"): the root is trusted, wherever its links point."""
        base = self.path(folder)
        from fsspec.implementations.local import LocalFileSystem

        if type(self.fs) is LocalFileSystem:  # fsspec's own (a subclass may list its own way)
            return _walk_local(base, self.root)
        try:
            found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return {}
        prefix = self.root + "/" if self.root else ""
        out = {}
        for full, info in found.items():
            if info.get("type", "file") != "file":
                continue
            full = self.fs._strip_protocol(full)
            out[full[len(prefix):] if full.startswith(prefix) else posixpath.relpath(full, self.root)] = int(
                info.get("size") or 0)
        return dict(sorted(out.items()))

    def open(self, rel: str) -> BinaryIO:
        """Open `rel` for binary reading (seekable).

        Raises:
            SourceFileNotFoundError: no such file (also a `FileNotFoundError`).
        """
        try:
            return self.fs.open(self.path(rel), "rb")
        except FileNotFoundError:
            raise SourceFileNotFoundError(f"{self.url}/{rel} does not exist.") from None

    def read_bytes(self, rel: str, start: int | None = None, end: int | None = None) -> bytes:
        """The bytes `[start, end)` of `rel` (the whole file by default; negative offsets count from the end,
        as in fsspec's `cat_file`).

        Raises:
            SourceFileNotFoundError: no such file.
        """
        try:
            return self.fs.cat_file(self.path(rel), start=start, end=end)
        except FileNotFoundError:
            raise SourceFileNotFoundError(f"{self.url}/{rel} does not exist.") from None

    def fingerprint(self, rel: str) -> str:
        """A string that changes when `rel` changes and stays equal while it does not, in any process: built
        from the file's own facts (size plus ETag, checksum or CRC, else mtime: see `file_facts`),
        never from object identity. Keys dl's caches.

        Raises:
            SourceFileNotFoundError: no such file.
        """
        try:
            info = self.fs.info(self.path(rel))
        except FileNotFoundError:
            raise SourceFileNotFoundError(f"{self.url}/{rel} does not exist.") from None
        return file_facts(info)

    def video_input(self, rel: str) -> str | BinaryIO:
        """What a decoder opens for the video `rel`: a local path when the file is on local disk, else a
        seekable file object. Remote sources may override this to hand out a locally cached copy."""
        return self.path(rel) if self.is_local else self.open(rel)

    def pinned_options(self) -> dict:
        """Source options that rebuild exactly this source without asking the server again (e.g. a Hub
        revision resolved to its commit sha). `dl run`'s host merges them into the options every run and
        rank gets, so they all read the version the host checked. Nothing here."""
        return {}

    def dataloader_needs(self) -> "DataLoaderNeeds":
        """What this source needs of the DataLoader (see `dl.dataloader.build`); nothing by default."""
        from .needs import DataLoaderNeeds

        return DataLoaderNeeds()


CONTENT_KEYS = ("ETag", "etag", "md5Hash", "crc32c", "CRC", "checksum", "blob_id")
TIME_KEYS = ("mtime", "LastModified", "last_modified", "updated")


def file_facts(info: dict) -> str:
    """A fingerprint from an fsspec `info()` dict: the size plus the content hashes the filesystem reports
    (ETag, MD5, CRC, checksum, git blob id), or, when it reports none, its modification time. (A hash is
    preferred: the same bytes uploaded twice get two modification times.)"""
    facts = [f"size={info.get('size')}"]
    keys = CONTENT_KEYS if any(info.get(k) is not None for k in CONTENT_KEYS) else TIME_KEYS
    facts += [f"{key}={info[key]}" for key in keys if info.get(key) is not None]
    return ";".join(facts)


def _walk_local(base: str, root: str) -> dict[str, int]:
    """Files under `base`, following symbolic links: a link to a folder on the way down to it (a loop) is skipped
    with a warning; a dangling link is not a file."""
    out: dict[str, int] = {}
    try:
        start = os.stat(base)
    except FileNotFoundError:
        return out
    pending = [(base, frozenset({(start.st_dev, start.st_ino)}))]
    while pending:
        folder, above = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                info = os.stat(entry.path)  # follows links
            except OSError:  # dangling, or a loop the kernel refuses to resolve (ELOOP)
                if entry.is_symlink() and os.path.lexists(entry.path) and _is_loop(entry.path):
                    _warn_loop(entry.path, root, "it cannot be resolved")
                continue
            if stat.S_ISDIR(info.st_mode):
                if (info.st_dev, info.st_ino) in above:
                    target = os.path.relpath(os.path.realpath(entry.path), root)
                    _warn_loop(entry.path, root, f"it leads back to {target}/")
                    continue
                pending.append((entry.path, above | {(info.st_dev, info.st_ino)}))
            else:
                out[os.path.relpath(entry.path, root).replace(os.sep, "/")] = info.st_size
    return dict(sorted(out.items()))


def _is_loop(path: str) -> bool:
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _warn_loop(full: str, root: str, why: str) -> None:
    from .errors import warn

    rel = os.path.relpath(full, root).replace(os.sep, "/")
    warn(f"{root}/{rel}: is a symbolic link loop ({why}); dl does not descend into it (LeRobot's loaders never reach "
         "it).")
