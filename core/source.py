"""Where a dataset's files live. Every source is an fsspec filesystem plus a root; local, hub and bucket
sources differ only in the filesystem they build, so metadata, tabular reads and decoding share code."""

import posixpath
from typing import BinaryIO

import fsspec


class Source:
    """A LeRobot v3.0 dataset root on an fsspec filesystem.

    Args:
        fs: the filesystem (e.g. `fsspec.filesystem("file")`).
        root: the dataset root on `fs` (a path, without protocol).
        name: the plugin name that built it, for messages and results.

    Paths given to the methods are relative to the root, with "/" separators, as in info.json.
    """

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str, name: str):
        self.fs, self.root, self.name = fs, root.rstrip("/"), name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    @property
    def url(self) -> str:
        """The root as a URL (`protocol://root`), for messages and results."""
        return self.fs.unstrip_protocol(self.root)

    def path(self, rel: str) -> str:
        """The full path of `rel` on `fs`."""
        return posixpath.join(self.root, rel)

    def exists(self, rel: str) -> bool:
        """Whether `rel` exists."""
        return self.fs.exists(self.path(rel))

    def glob(self, pattern: str) -> list[str]:
        """Relative paths matching a glob pattern under the root, sorted."""
        return sorted(posixpath.relpath(p, self.root) for p in self.fs.glob(self.path(pattern)))

    def open(self, rel: str) -> BinaryIO:
        """Open `rel` for binary reading (seekable)."""
        return self.fs.open(self.path(rel), "rb")

    def fingerprint(self, rel: str) -> str:
        """A string that changes when `rel` changes (size + mtime/etag), for cache keys."""
        info = self.fs.info(self.path(rel))
        stamp = info.get("mtime") or info.get("ETag") or info.get("etag") or info.get("LastModified") or ""
        return f"{info.get('size')}:{stamp}"

    def video_input(self, rel: str) -> str | BinaryIO:
        """What a decoder opens for the video `rel`: a local path when the file is on local disk, else a
        seekable file object. Remote sources may override this to cache files locally."""
        if "file" in self.fs.protocol or "local" in self.fs.protocol:
            return self.path(rel)
        return self.open(rel)
