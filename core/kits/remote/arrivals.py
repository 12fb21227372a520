"""A download's bytes as they arrive. One download of a `dl.kits.remote.file_cache.PrefetchCache` carries several
adjacent cached ranges (the pieces a thread joins into one request), and each is handed on as soon as its last
byte is in: a reader waiting for the first range of a joined download waits for that range, not for the whole
download (the source streams the response, `dl.kits.remote.store.RemoteStore.stream_range`)."""

import contextlib
import io
import os
from collections.abc import Callable

from .cache_entry import Entry


class Arrivals(io.BytesIO):
    """The bytes of one download from file offset `start`, written in order (as a `Download` writes): each entry of
    `run` (adjacent ranges, ascending from `start`) goes to `on_whole(self, entry)` once the bytes up to its end
    are in; `pending` holds those not handed on (an entry whose `on_whole` raised stays pending). A writer may seek
    back and write the same bytes again (`dl.kits.remote.peer_copies` undoes a copy that failed midway)."""

    def __init__(self, start: int, run: list[Entry], on_whole: Callable[["Arrivals", Entry], None]):
        super().__init__()
        self.start, self.pending, self.on_whole = start, list(run), on_whole

    def write(self, data) -> int:
        written = super().write(data)
        end = self.start + self.tell()
        while self.pending and self.pending[0].piece.end <= end:
            self.on_whole(self, self.pending[0])
            self.pending.pop(0)
        return written

    def save(self, entry: Entry) -> None:
        """Write `entry`'s bytes (all in) to its file `entry.path` (`save`)."""
        with self.getbuffer() as view:
            save(entry.path, view[entry.piece.start - self.start:entry.piece.end - self.start])


def save(path: str, data) -> None:
    """Write `data` (bytes-like) to the file `path`, whole or not at all: under a temporary name first, renamed
    once written (another process listing the folder never sees a part, `dl.kits.remote.peer_copies`), removed if
    the write fails."""
    part = f"{path}.tmp"
    os.makedirs(os.path.dirname(part), exist_ok=True)
    try:
        with open(part, "wb") as out:
            out.write(data)
        os.replace(part, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(part)
        raise
