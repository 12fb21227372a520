"""A byte-bounded, reference-counted local cache of byte ranges of remote files, filled by background
download threads.

Generic (knows nothing of datasets): `dl.kits.remote.source.RemoteSource` keeps one per reading process and
fills it on the admission signal (`Source.admit` / `release`). The unit is a byte range of a file (a
`Piece`): an episode holds the ranges of its frames and rows, not whole files, and LeRobot v3.0 packs many
episodes per file, so ranges of several keys (episodes) may meet or overlap. Ranges are cached without
overlap: a key admitting bytes already held (or on their way) holds those entries too and only the gaps
are downloaded, so adjacent episodes share their common bytes (a keyframe, a row group) and a reader
crosses from one entry into the next. An entry is deleted when the last key holding it is released, or, with
`keep_released`, a downloaded one stays (still counted against the limit) until its room is needed, least
recently released first: a later epoch that admits the same episode in the same process finds its bytes.
Downloads are pieces of the admitted ranges, the bytes readers need first first (`dl.kits.remote.piece_order`):
the first piece of every admitted range before the second of any, or, where the loader says in which order it
reads (`Ranked` reads), the bytes of every key's first reads before those of any key's second; so a loader that
opens many episodes at once can start on all of them without waiting for any whole range. A thread taking a piece
takes the pieces queued right after it in the same file along, in one download of at most `coalesce_bytes` (fewer
requests: each costs a round trip, and a server's work per request), or of at most `calm_coalesce_bytes` once no
reader has waited for a download for `calm_s` (the downloads are ahead of the readers, so a longer download holds
no reader back); they stay separate entries, each ready as soon as its own bytes are in (`dl.kits.remote.arrivals`),
so a reader of the first waits for it alone. A first read's piece (depth 0) takes only first reads' pieces along,
and one a reader takes over goes alone. Admission never
blocks the caller: entries wait in line (first come, first served) until the byte limit lets them in, and a
reader that needs bytes still waiting for room gets `None` and reads them remotely instead, so a full cache
slows reads down but can never deadlock a loader that admits its next episode before releasing the last one.
One key needing more bytes than the whole limit is an error that says so. A process may also `put` bytes it has
read already (the host's reads of the files' indexes), as downloaded ranges.

A process asks this host's other processes first (`dl.kits.remote.peer_copies`): bytes of a shared file (one
`shared` names) that their run folders hold are not downloaded, so the workers of a later epoch, the workers after
the host's own pass, and the ranks of a node fetch each range once between them while it is kept. Admitted ranges
are cut at the bounds of those files, and a range one file holds whole becomes a hard link to it (an entry then
reads its bytes from an `offset` into that file); the rest is copied.

Each cache has its own run folder (`dl.kits.remote.run_folders`: `run-<host>-<pid>-<start time>.<n>` under
node-local storage first, or a source's `cache_dir`), removed when the process exits (also in DataLoader workers)
and, after a crash, by the next process on the same host that starts a cache.
"""

import hashlib
import heapq
import itertools
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.util import Finalize
from pathlib import Path

from ...contracts.errors import DlError
from .arrivals import Arrivals, save
from .cache_entry import Download, Entry, Located, State
from .file_ranges import FileRanges, Piece, merged
from .peer_copies import PeerCopies, range_name
from .piece_order import CALM_S, COALESCE_BYTES, PieceOrder, Ranked
from .run_folders import run_dir


class CacheLimitError(DlError):
    """What a key needs cannot fit in the cache's byte limit."""


class PrefetchCache:
    """Local copies of byte ranges of remote files for one process.

    Args:
        base: the folder holding every process's run folder (e.g. `default_base()`).
        limit_bytes: the most bytes reserved at once (ranges waiting for room do not count).
        download: fetches a range (see `Download`); it does its own retries.
        threads: background download threads (started on the first admission).
        on_reserved: called with the reserved bytes whenever they change (a peak counter).
        on_done: called after each download ends (ready or failed), outside the lock.
        inherited: `Located` copies by file of ranges a parent process had ready when this one forked: read
            when still present, never deleted by this process.
        order: where ranges are cut into downloads (`dl.kits.remote.piece_order.PieceOrder`).
        keep_released: keep downloaded ranges after their last release until their room is needed (for a
            selection that fits the limit: it is then downloaded once per process, not once per epoch).
        shared: the name under which the ranges of a remote file are shared with this host's other processes
            (one name per file version, e.g. a digest of its URL and ETag), or None for a file not to share;
            without it nothing is shared.
        on_copied: called, after a download that copied bytes from another process's cache, with their count.
        coalesce_bytes: the most bytes one download of pieces following one another may carry (0: every piece
            alone).
        calm_coalesce_bytes: the same once no reader has waited for a download (`locate` finding its range queued
            or downloading) for `calm_s` seconds of `clock`; None: `coalesce_bytes` always.
    """

    def __init__(self, base: Path, limit_bytes: int, download: Download, threads: int = 4,
                 on_reserved: Callable[[int], None] | None = None, on_done: Callable[[], None] | None = None,
                 inherited: dict[str, list[Located]] | None = None, order: PieceOrder | None = None,
                 keep_released: bool = False, shared: Callable[[str], str | None] | None = None,
                 on_copied: Callable[[int], None] | None = None, coalesce_bytes: int = COALESCE_BYTES,
                 calm_coalesce_bytes: int | None = None, calm_s: float = CALM_S,
                 clock: Callable[[], float] = time.monotonic):
        if limit_bytes < 1:
            raise DlError(f"cache limit must be >= 1 byte, got {limit_bytes}.")
        self.base, self.limit, self.download, self.threads = Path(base), int(limit_bytes), download, max(1, threads)
        self.on_reserved = on_reserved or (lambda n: None)
        self.on_done = on_done or (lambda: None)
        self.inherited = {rel: sorted(pieces) for rel, pieces in (inherited or {}).items()}
        self.reserved = 0
        self._entries: dict[Piece, Entry] = {}
        self._ranges = FileRanges()  # the entries' ranges
        self.order = order or PieceOrder()
        self.keep_released = keep_released
        self.shared = shared or (lambda rel: None)
        self.on_copied = on_copied or (lambda n: None)
        self.coalesce_bytes = int(coalesce_bytes)
        self.calm_coalesce_bytes = self.coalesce_bytes if calm_coalesce_bytes is None else int(calm_coalesce_bytes)
        self.calm_s, self.clock = float(calm_s), clock
        self._reader_waited = -float("inf")  # when a reader last found its range queued or downloading
        self._peers: PeerCopies | None = None
        self._held: dict[object, dict[Piece, int]] = {}  # each key's entries and the depth it reads them at
        self._idle: dict[Piece, None] = {}  # downloaded entries no key holds, least recently released first
        self._waiting: deque[Piece] = deque()
        self._queued: list[tuple[int, int, Piece]] = []  # a heap of (depth, number, piece); stale items skipped
        self._numbers = itertools.count()
        self._cond = threading.Condition()
        self._workers: list[threading.Thread] = []
        self._copies = 0  # numbers each local copy, so a re-admitted range never shares a path with one in flight
        self._closed = False
        self.dir: Path | None = None

    # ------------------------------------------------------------------------------------ admission
    def admit(self, key: object, pieces: list[Piece], atomic: list[Piece] = (), reads: list[Ranked] = ()) -> None:
        """`key` will read `pieces` (byte ranges): download the bytes not held yet, as room allows, those it
        reads first first.

        Args:
            atomic: ranges to download in one request each, never cut (an index whose digest is checked).
            reads: which bytes of `pieces` it reads in which order (`dl.kits.remote.piece_order.Ranked`); a range
                no read falls in is read from its start.

        Raises:
            CacheLimitError: the bytes `key` needs, beyond those already held, exceed the limit.
        """
        with self._cond:
            ranges = merged(pieces)
            gaps = [gap for piece in ranges for gap in self._ranges.gaps(piece)]
            need = sum(g.end - g.start for g in gaps)
            if need > self.limit:
                files = sorted({g.rel for g in gaps})
                raise CacheLimitError(
                    f"episode {key} needs {_mb(need)} of {', '.join(files)} but the local cache holds at most "
                    f"{_mb(self.limit)} in this process; raise the source option cache_bytes, or set "
                    "prefetch=false to stream reads without a cache.")
            self._start()
            held = self._held.setdefault(key, {})
            for whole in ranges:
                fixed = [(a.start, a.end) for a in atomic if a.rel == whole.rel]
                zones = self.order.zones(whole.start, whole.end, [
                    r for r in reads if r.rel == whole.rel and r.start < whole.end and whole.start < r.end])
                shared = self.shared(whole.rel)
                for gap in self._ranges.gaps(whole):
                    peers = [] if shared is None else self._peers.bounds(shared, gap.start, gap.end)
                    for start, end, depth in self.order.cut(zones, (gap.start, gap.end), fixed, peers):
                        self._add(Piece(whole.rel, start, end), depth)
                for covered in self._ranges.overlapping(whole):
                    depth = self.order.depth(zones, covered.start, covered.end)
                    self._entries[covered].keys.add(key)
                    self._idle.pop(covered, None)
                    held[covered] = min(depth, held.get(covered, depth))
                    self._sooner(covered, depth)  # another key may read it sooner
            self._grant()

    def _add(self, piece: Piece, depth: int) -> None:
        """A new entry for `piece`, waiting for room (called with the lock held)."""
        self._entries[piece] = Entry(piece, self._path(piece), depth)
        self._ranges.add(piece)
        self._waiting.append(piece)

    def _path(self, piece: Piece) -> str:
        """A new local file name for `piece` (called with the lock held)."""
        self._copies += 1
        shared = self.shared(piece.rel)
        if shared is None:
            name = hashlib.sha1(piece.rel.encode()).hexdigest()[:20]
            return str(self.dir / f"{name}-{self._copies}.part{piece.start}")
        return str(self.dir / shared / range_name(piece.start, piece.end, self._copies))

    def put(self, key: object, rel: str, start: int, data: bytes) -> None:
        """Bytes of `rel` from offset `start` this process has read already (the index bytes the host reads to plan
        the ranges): each part no entry holds yet, while it fits the limit, becomes a downloaded entry held by
        `key`, for this process's readers and, shared, for this host's other processes (the run's ranks and
        DataLoader workers copy it instead of fetching it again: `dl.kits.remote.peer_copies`). A part that cannot
        be written is left out (its readers download it)."""
        with self._cond:
            self._folder()
            for gap in self._ranges.gaps(Piece(rel, start, start + len(data))):
                if self.reserved + gap.end - gap.start > self.limit:
                    continue
                entry = Entry(gap, self._path(gap), depth=0)
                try:
                    save(entry.path, memoryview(data)[gap.start - start:gap.end - start])
                except OSError:
                    continue
                entry.state = State.READY
                entry.done.set()
                entry.keys.add(key)
                self._entries[gap] = entry
                self._ranges.add(gap)
                self._held.setdefault(key, {})[gap] = 0
                self.reserved += entry.size
                self.on_reserved(self.reserved)

    def promote(self, pieces: list[Piece]) -> None:
        """Readers need `pieces` next: the queued entries holding them come next in line (at depth 0, after
        those already there)."""
        with self._cond:
            for piece in merged(pieces):
                for covered in self._ranges.overlapping(piece):
                    self._sooner(covered, 0)

    def _sooner(self, piece: Piece, depth: int) -> None:
        """The entry `piece` is read at `depth`: when that is shallower than its own, it moves up the line (called
        with the lock held)."""
        entry = self._entries[piece]
        if depth < entry.depth:
            entry.depth = depth
            if entry.state is State.QUEUED:
                heapq.heappush(self._queued, (depth, next(self._numbers), piece))

    def release(self, key: object, keep: bool | None = None) -> None:
        """`key` is done: ranges no other key holds are deleted (or dropped from the line), or, with `keep`
        (default: `keep_released`), kept until their room is needed once downloaded."""
        keep = self.keep_released if keep is None else keep
        with self._cond:
            for piece in self._held.pop(key, ()):
                entry = self._entries[piece]
                entry.keys.discard(key)
                if entry.keys:
                    continue
                if keep and entry.state is State.READY:
                    self._idle[piece] = None
                else:
                    self._drop(entry)
            self._grant()

    def _drop(self, entry: Entry) -> None:
        self._idle.pop(entry.piece, None)
        del self._entries[entry.piece]
        self._ranges.remove(entry.piece)
        if entry.state is State.WAITING:
            self._waiting.remove(entry.piece)
            return
        # a download in flight cleans up after itself; a queued entry's heap item is skipped when it comes up
        if entry.state in (State.QUEUED, State.READY):
            _remove(entry.path)
            self._unreserve(entry.size)

    def _grant(self) -> None:
        """Let waiting ranges in, in order, while they fit, deleting released ranges (least recently released
        first) to make room (called with the lock held)."""
        while self._waiting:
            entry = self._entries[self._waiting[0]]
            if self.reserved + entry.size > self.limit and self._idle:
                self._drop(self._entries[next(iter(self._idle))])
                continue
            if self.reserved + entry.size > self.limit:
                break
            self._waiting.popleft()
            entry.state = State.QUEUED
            heapq.heappush(self._queued, (entry.depth, next(self._numbers), entry.piece))
            self.reserved += entry.size
            self.on_reserved(self.reserved)
        self._cond.notify_all()

    def _unreserve(self, size: int) -> None:
        self.reserved -= size
        self.on_reserved(self.reserved)

    # ------------------------------------------------------------------------------------ reads
    def locate(self, rel: str, pos: int, wait: bool = True) -> Located | None:
        """A local copy of the bytes of `rel` at offset `pos` (the cached range holding it): waits for its
        download when one is queued or running (taking a queued one over in this thread), and returns None
        when no admitted range holds `pos` or its range still waits for room (read it remotely then). With
        `wait=False` it returns a copy only when its download is done: None for a range queued, downloading,
        waiting for room or failed, none of them touched.

        Raises:
            The download's own error (e.g. `SourceFileNotFoundError`, `dl.kits.remote.retry.RemoteReadError`).
        """
        with self._cond:
            found = self._ranges.overlapping(Piece(rel, pos, pos + 1))
            if not found:
                return self._inherited(rel, pos)
            entry = self._entries[found[0]]
            if entry.state is State.WAITING or (not wait and entry.state is not State.READY):
                return None
            if entry.state in (State.QUEUED, State.LOADING):
                self._reader_waited = self.clock()
            claimed = entry.state is State.QUEUED
            if claimed:  # its heap item is skipped when it comes up
                entry.state = State.LOADING
        if claimed:
            self._fetch([entry])
        entry.done.wait()
        if entry.state is State.FAILED:
            raise entry.error
        return Located(entry.path, entry.piece.start, entry.piece.end, entry.offset)

    def _inherited(self, rel: str, pos: int) -> Located | None:
        for located in self.inherited.get(rel, ()):
            if located.start <= pos < located.end and os.path.exists(located.path):
                return located
        return None

    def on_host(self, pieces: list[Piece]) -> bool:
        """Whether admitting `pieces` would download nothing: every byte is downloaded here, or lies in a range
        another cache of this host holds (`dl.kits.remote.peer_copies`: copied, not fetched). False before this
        cache's first admission (it knows no peers yet) and for a file not shared."""
        with self._cond:
            if self._peers is None:
                return False
            gaps = []
            for piece in merged(pieces):
                if any(self._entries[p].state is not State.READY for p in self._ranges.overlapping(piece)):
                    return False
                gaps += self._ranges.gaps(piece)
        return all((name := self.shared(gap.rel)) is not None and self._peers.covers(name, gap.start, gap.end)
                   for gap in gaps)

    def held(self, rel: str) -> bool:
        """Whether any range of `rel` is admitted here or was inherited."""
        with self._cond:
            return self._ranges.holds(rel) or rel in self.inherited

    def settle(self) -> None:
        """Block until every admitted range is downloaded.

        Raises:
            CacheLimitError: ranges wait for room that no release will free (the admitted keys need more
                than the limit together). A download's own error.
        """
        with self._cond:
            while True:
                failed = next((e for e in self._entries.values() if e.state is State.FAILED), None)
                if failed is not None:
                    raise failed.error
                busy = [e for e in self._entries.values() if e.state in (State.QUEUED, State.LOADING)]
                if self._waiting and not busy:
                    need = sum(e.size for e in self._entries.values())
                    raise CacheLimitError(
                        f"the admitted episodes need {_mb(need)} together, more than the local cache's "
                        f"{_mb(self.limit)}; raise the source option cache_bytes, select fewer episodes, or set "
                        "prefetch=false to stream reads without a cache.")
                if not busy:
                    return
                self._cond.wait(timeout=1.0)

    def ready(self, key: object, depth: int | None = None) -> bool:
        """Whether every entry `key` holds (or only those it reads at `depth` or shallower: 0, what it reads
        first) is downloaded (or failed)."""
        with self._cond:
            return all(self._entries[p].state in (State.READY, State.FAILED)
                       for p, at in self._held.get(key, {}).items() if depth is None or at <= depth)

    # ------------------------------------------------------------------------------------ downloads
    def _folder(self) -> None:
        """This cache's run folder, made on first use (removed when the process exits)."""
        if self.dir is None:
            self.dir = run_dir(self.base)
            self._peers = PeerCopies(self.base, self.dir)
            Finalize(self, shutil.rmtree, args=(str(self.dir),), kwargs={"ignore_errors": True}, exitpriority=10)

    def _start(self) -> None:
        self._folder()
        while len(self._workers) < self.threads:
            worker = threading.Thread(target=self._work, name=f"dl-prefetch-{len(self._workers)}", daemon=True)
            worker.start()
            self._workers.append(worker)

    def _work(self) -> None:
        while True:
            with self._cond:
                entry = None
                while entry is None:
                    while not self._queued and not self._closed:
                        self._cond.wait()
                    if self._closed:
                        return
                    entry = self._entries.get(heapq.heappop(self._queued)[2])
                    if entry is not None and entry.state is not State.QUEUED:  # a stale item: taken or dropped
                        entry = None
                run = self._take_run(entry)
            self._fetch(run)

    def _take_run(self, entry: Entry) -> list[Entry]:
        """`entry` and the queued entries right after it in its file, while their bytes add up to at most
        `coalesce_bytes` (`calm_coalesce_bytes` when no reader has waited for `calm_s`) and, after a first read's
        piece (depth 0), while they are first reads too (the pieces a first read is cut into: a deeper one would
        hold a reader's first bytes back): one download, taken (called with the lock held)."""
        entry.state = State.LOADING
        run, size = [entry], entry.size
        calm = self.clock() - self._reader_waited >= self.calm_s
        limit = self.calm_coalesce_bytes if calm else self.coalesce_bytes
        while True:
            last = run[-1].piece
            after = self._ranges.overlapping(Piece(last.rel, last.end, last.end + 1))
            follower = self._entries[after[0]] if after and after[0].start == last.end else None
            if (follower is None or follower.state is not State.QUEUED or size + follower.size > limit
                    or (entry.depth == 0 and follower.depth > 0)):
                return run
            follower.state = State.LOADING
            run.append(follower)
            size += follower.size

    def _fetch(self, run: list[Entry]) -> None:
        """Get `run` (adjacent ranges of one file, taken): each range a file of another process on this host holds
        whole becomes a hard link to it (`PeerCopies.link`: no byte copied), the others are downloaded in one go
        per stretch of adjacent ones (bytes other processes hold copied, see `PeerCopies.fill`); each range is
        written to its file and ready as soon as its bytes are in (`Arrivals`)."""
        shared = self.shared(run[0].piece.rel)
        from_peers, rest = 0, run
        if shared is not None:
            rest = []
            for entry in run:
                if self._link(shared, entry):
                    from_peers += entry.size
                else:
                    rest.append(entry)
        for stretch in _adjacent(rest):
            from_peers += self._fill(stretch, shared)
        if from_peers:
            self.on_copied(from_peers)
        self.on_done()

    def _link(self, shared: str, entry: Entry) -> bool:
        """Make `entry` (taken) a hard link to a file of another process that holds all its bytes, ready; False
        when none does, or the link cannot be made."""
        with self._cond:
            self._copies += 1
            copy = self._copies
        linked = self._peers.link(shared, entry.piece.start, entry.piece.end, self.dir / shared, copy)
        if linked is None:
            return False
        entry.path, entry.offset = linked
        self._settle([entry], State.READY)
        return True

    def _fill(self, run: list[Entry], shared: str | None) -> int:
        """Download `run` (adjacent ranges of one file, taken) in one go, the bytes other processes hold copied;
        returns the bytes copied. A failure is handed to the readers of the ranges not in."""
        rel, start, end = run[0].piece.rel, run[0].piece.start, run[-1].piece.end
        arrivals = Arrivals(start, run, self._whole)
        try:
            copied = 0
            if shared is None:
                self.download(rel, start, end, arrivals)
            else:
                copied = self._peers.fill(shared, start, end, arrivals,
                                          lambda lo, hi: self.download(rel, lo, hi, arrivals))
            if arrivals.pending:
                raise OSError(f"the download of bytes {start}-{end} of {rel} stopped at {start + arrivals.tell()}")
            return copied
        except BaseException as exc:  # handed to every reader of the ranges not in (none has a file)
            self._settle(arrivals.pending, State.FAILED, exc)
            return 0

    def _whole(self, arrivals: Arrivals, entry: Entry) -> None:
        """Every byte of `entry` (downloading) is in `arrivals`: write its file, and it is ready."""
        arrivals.save(entry)
        self._settle([entry], State.READY)

    def _settle(self, entries: list[Entry], state: State, error: BaseException | None = None) -> None:
        """Downloads of `entries` ended in `state`: their readers wake; an entry released meanwhile is deleted."""
        with self._cond:
            for entry in entries:
                entry.state, entry.error = state, error
                if self._entries.get(entry.piece) is not entry:  # released while downloading
                    _remove(entry.path)
                    self._unreserve(entry.size)
                elif state is State.FAILED:
                    self._unreserve(entry.size)
                entry.done.set()
            self._grant()

    def ready_pieces(self) -> dict[str, list[Located]]:
        """`{rel: [Located, ...]}` of the ranges downloaded and present now (handed to forked children)."""
        with self._cond:
            out = {rel: [p for p in pieces if os.path.exists(p.path)] for rel, pieces in self.inherited.items()}
            for entry in self._entries.values():
                if entry.state is State.READY:
                    out.setdefault(entry.piece.rel, []).append(Located(entry.path, *entry.piece[1:], entry.offset))
        return out

    def close(self) -> None:
        """Stop the download threads, waiting for their current file, drop the released ranges kept, and delete
        this process's folder."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for worker in self._workers:
            worker.join()
        with self._cond:
            for piece in list(self._idle):
                self._drop(self._entries[piece])
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)


def _adjacent(entries: list[Entry]) -> list[list[Entry]]:
    """`entries` (ascending in one file) in stretches of ranges that follow one another without a gap."""
    out: list[list[Entry]] = []
    for entry in entries:
        if out and out[-1][-1].piece.end == entry.piece.start:
            out[-1].append(entry)
        else:
            out.append([entry])
    return out


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"
