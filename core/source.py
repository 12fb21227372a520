"""Where a dataset's files live. Every source is an fsspec filesystem plus a root; local, hub and bucket
sources differ only in the filesystem they build, so metadata, tabular reads and decoding share code."""

import os
import posixpath
from functools import cached_property
from typing import BinaryIO

import fsspec
from fsspec.implementations.local import LocalFileSystem


class Source:
    """A LeRobot v3.0 dataset root on an fsspec filesystem.

    Args:
        fs: the filesystem (e.g. `fsspec.filesystem("file")`).
        root: the dataset root on `fs` (a path, without protocol).
        name: the plugin name that built it, for messages and results.

    Paths given to the methods are relative to the root, with "/" separators, as in info.json.
    The filesystem is rebuilt once in each forked process (DataLoader workers): an instance inherited across
    fork may share open files or connections with its parent, and interleaved reads corrupt each other.
    """

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str, name: str):
        self.root, self.name = root.rstrip("/"), name
        self._fs, self._pid = fs, os.getpid()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """This process's filesystem instance."""
        if self._pid != os.getpid():
            # fsspec's instance cache is per process, so this makes a fresh instance after fork
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
        return isinstance(self.fs, LocalFileSystem)

    def path(self, rel: str) -> str:
        """The full path of `rel` on `fs`."""
        return posixpath.join(self.root, rel)

    def exists(self, rel: str) -> bool:
        """Whether `rel` exists."""
        return self.fs.exists(self.path(rel))

    def glob(self, pattern: str) -> list[str]:
        """Relative paths matching a glob pattern under the root, sorted."""
        return sorted(posixpath.relpath(p, self.root or ".") for p in self.fs.glob(self.path(pattern)))

    def open(self, rel: str) -> BinaryIO:
        """Open `rel` for binary reading (seekable)."""
        return self.fs.open(self.path(rel), "rb")

    def fingerprint(self, rel: str) -> str:
        """A string that changes when `rel` changes, for cache keys: fsspec's `ukey` (a hash of the file's
        info: size and mtime locally, ETag on object stores)."""
        return self.fs.ukey(self.path(rel))

    def video_input(self, rel: str) -> str | BinaryIO:
        """What a decoder opens for the video `rel`: a local path when the file is on local disk, else a
        seekable file object. Remote sources may override this to cache files locally."""
        return self.path(rel) if self.is_local else self.open(rel)
