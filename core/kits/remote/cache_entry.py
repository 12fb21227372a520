"""One byte range held by a `dl.kits.remote.file_cache.PrefetchCache` (an `Entry`: its state on the way from
waiting for room to downloaded, the keys holding it, its local file), and what a reader is handed (`Located`)."""

import enum
import threading
from collections.abc import Callable
from typing import BinaryIO, NamedTuple

from .file_ranges import Piece

Download = Callable[[str, int, int, BinaryIO], None]
"""`download(rel, start, end, out)`: write bytes `[start, end)` of the remote file `rel` into `out`, in order (as
they arrive: the cache hands each range on once its bytes are in); raises on failure."""


class Located(NamedTuple):
    """A local copy of bytes `[start, end)` of a remote file: `path` holds them from its byte `offset` on (0 for a
    range downloaded here; a hard link to another process's range that begins earlier in the file, past 0)."""

    path: str
    start: int
    end: int
    offset: int = 0


class State(enum.Enum):
    """Where an entry is: waiting for room in the byte limit, queued for a download thread, downloading, on disk
    (ready), or failed (its error handed to every reader)."""

    WAITING = "waiting for room"
    QUEUED = "queued"
    LOADING = "downloading"
    READY = "ready"
    FAILED = "failed"


class Entry:
    """A cached range: `piece`, its local `path` (holding the piece's bytes from its byte `offset` on), the `keys`
    holding it, its `state` (`done` set once ready or failed, with `error`), and `depth`, the shallowest any key
    reads it at (`dl.kits.remote.piece_order`)."""

    __slots__ = ("piece", "keys", "state", "done", "error", "path", "offset", "depth")

    def __init__(self, piece: Piece, path: str, depth: int):
        self.piece, self.path, self.depth = piece, path, depth
        self.offset = 0
        self.keys: set = set()
        self.state = State.WAITING
        self.done = threading.Event()
        self.error: BaseException | None = None

    @property
    def size(self) -> int:
        return self.piece.end - self.piece.start
