"""Seekable files over a remote file, as `dl.kits.remote.source.RemoteSource` hands them to decoders (torchcodec
takes file-like objects) and to pyarrow: a `CachedView` reads each block from this host's cache (fetching it, or
waiting while another thread or process does), or, for a source without prefetch, straight from the store."""

import io
import os

from .host_cache import BLOCK_BYTES


class CachedView(io.RawIOBase):
    """A seekable raw file over the remote file `rel` of `size` bytes of `source` (the `RemoteSource` reading through
    it; not annotated: that would import its module, which imports this one): a read returns the bytes of one block at
    most (a short read), from the block's file in the cache (`source.block_path`), or, without prefetch, at most
    `block_size` bytes from the store (`source.read_bytes`, counted as a remote read).

    With `fills`, for a reader that fills a buffer by reading on after a short read until a read returns no bytes
    (torchcodec's FFmpeg I/O callback), a read that follows a short one returns no bytes where the next block is not
    in the cache yet: the fill ends there instead of waiting for bytes the decoder only reads ahead. Its next fill
    (after a full or empty read, or a seek) waits for the bytes it needs, so a decoder gets every byte, only later.
    Never for a reader that reads once per fill or takes a short read as the end of the file."""

    def __init__(self, source, rel: str, size: int, fills: bool = False):
        super().__init__()
        self.source, self.rel, self.size, self.pos, self.fills = source, rel, size, 0, fills
        self._fd: tuple[str, int] | None = None  # (path, fd) of the last block read
        self._short = False  # the last read returned fewer bytes than asked (no seek since): a fill goes on

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._short = False
        self.pos = max(0, {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence] + offset)
        return self.pos

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.size - self.pos)
        if n <= 0:
            return 0
        if not self.source.options.prefetch:
            self.source.counters.add("remote_reads")
            data = self.source.read_bytes(self.rel, self.pos, self.pos + min(n, self.source.options.block_size))
        else:
            block, at = divmod(self.pos, BLOCK_BYTES)
            path = self.source.block_path(self.rel, block, wait=not (self.fills and self._short))
            data = b"" if path is None else os.pread(self._open(path), min(n, BLOCK_BYTES - at), at)
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
