"""Seekable files over a remote file, as `dl.kits.remote.source.RemoteSource` hands them to decoders (torchcodec
takes file-like objects) and to pyarrow: a `CachedView` serves the ranges the source's prefetch cache holds (a
video's index and an episode's frames, a parquet footer and row groups) and reads anything else remotely, so a
reader never waits for a whole file and never gets bytes that are not the file's."""

import io
import os
from typing import Protocol

from .cache_entry import Located


class Reads(Protocol):
    """What the views need of their source."""

    def remote_read(self, rel: str, start: int, end: int) -> bytes:
        """Bytes `[start, end)` of `rel` from the store (counted as a remote read and as network wait)."""

    def cached(self, rel: str, pos: int, wait: bool = True) -> Located | None:
        """The local copy of the cached range of `rel` holding `pos`, waiting for its download (None: not
        cached; with `wait=False`, also None while it is not downloaded)."""


class _Seekable(io.RawIOBase):
    def __init__(self, rel: str, size: int):
        self.rel, self.size, self.pos = rel, size, 0

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


class CachedView(_Seekable):
    """A seekable raw file over a remote file whose admitted ranges are cached: a read inside a cached range
    is served from its local copy (up to the range's end: a short read, as files may give), waiting for its
    download; a read elsewhere is fetched remotely, at most `block_size` bytes.

    With `fills`, for a reader that fills a buffer by reading on after a short read until a read returns no bytes
    (torchcodec: its FFmpeg I/O callback fills a 64 KiB buffer from a file object that way), a read that follows
    a short one is served only from ranges already downloaded, and returns no bytes where the next range is not:
    the fill ends there with what it has instead of waiting for bytes the decoder only reads ahead (the next
    chunk's, downloaded later in the order the loader reads them: `dl.kits.remote.span_reads`). The reader's next
    fill (a read after a full or an empty one, or after a seek) is for bytes it needs, and waits for them as any
    read does, so a decoder gets every byte it reads, only later. With reads placed without the read-ahead
    (`span_reads`), the window's first seconds serve more (`benchmarks/results/internals.md`, "Remote byte ranges").

    Args:
        source: the remote source (`Reads`).
        rel: the file, relative to the source root.
        size: its size in bytes.
        block_size: the most bytes one remote read fetches.
        fills: end a reader's fill at bytes not downloaded yet (above), for a reader that reads on after a short
            read until a read returns no bytes (torchcodec: `dl.kits.video.torchcodec_video.open_video` turns it
            on); never for one that reads once per fill (an empty read would end its file) or takes a short read
            as the end of the file.
    """

    def __init__(self, source: Reads, rel: str, size: int, block_size: int, fills: bool = False):
        super().__init__(rel, size)
        self.source, self.block_size, self.fills = source, block_size, fills
        self._fd: tuple[str, int] | None = None  # (path, fd) of the last local copy read
        self._short = False  # the last read returned fewer bytes than asked (no seek since): a fill goes on

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._short = False
        return super().seek(offset, whence)

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.size - self.pos)
        if n <= 0:
            return 0
        ahead = self.fills and self._short
        located = self.source.cached(self.rel, self.pos, wait=not ahead)
        if located is not None:
            data = os.pread(self._open(located.path), min(n, located.end - self.pos),
                            self.pos - located.start + located.offset)
        elif ahead:  # read ahead in a fill, bytes not downloaded yet: end the fill here
            data = b""
        else:
            data = self.source.remote_read(self.rel, self.pos, self.pos + min(n, self.block_size))
        buffer[: len(data)] = data
        self.pos += len(data)
        self._short = 0 < len(data) < n
        return len(data)

    def _open(self, path: str) -> int:
        if self._fd is None or self._fd[0] != path:
            self._close_fd()
            self._fd = (path, os.open(path, os.O_RDONLY))
        return self._fd[1]

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd[1])
            self._fd = None

    def close(self) -> None:
        self._close_fd()
        super().close()
