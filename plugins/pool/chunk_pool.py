"""The pool's second level, without any I/O: which chunk of consecutive frames a consumer decodes next and which
frame it emits, so that video is decoded in order, about once per frame, while batches stay as shuffled as the
episode pool's.

A consumer keeps `pool_size` episodes open, admitted uniformly from its remaining episodes (as `EpisodePool`).
Each open episode is cut into chunks of `chunk_frames` consecutive rows (rows r with the same r // chunk_frames),
opened one at a time in an order drawn at admission. At most `open_chunks` episodes are active, each with one
open chunk; an emission draws an active episode in proportion to its frames left, then a random remaining row
of its open chunk. A used-up chunk frees its slot for an open episode without an open chunk, drawn in
proportion to its frames left. One chunk per episode means the open chunks span as many episodes as there are
slots, and drawing by frames left makes episodes run out together, as a uniform draw over the pool's frames
does: with as many slots as a consumer has episodes a batch mixes as many episodes as the shuffle ceiling
(simulated on open50's split over 2 workers: 1.00 of it with 24 slots, 0.92 with 16; drawing frames uniformly
from the open chunks instead gives 0.55-0.88). A chunk is decoded when its first frame is drawn and dropped
when its last is emitted. Everything is a function of counters and the consumer's RNG, so a resumed consumer
replays it to any position without reading or decoding (`dl.dataloader.resume`, `dl.dataloader.elastic`)."""

from dataclasses import dataclass

import numpy as np

from .episode_pool import EpisodePool, draw_weighted


@dataclass(frozen=True)
class Chunk:
    """The chunk an emission came from.

    Attributes:
        episode: the episode's position (in the loader's selection).
        index: the chunk's number in the episode (its rows r have r // chunk_frames == index).
        rows: int64, the chunk's rows this segment emits, ascending (all of rows index*chunk_frames ...
            (index+1)*chunk_frames - 1 in an epoch's first segment; what is left of them after an elastic resume).
        closed: this emission was the chunk's last (its decoded frames can be dropped).
    """

    episode: int
    index: int
    rows: np.ndarray
    closed: bool

    @property
    def key(self) -> tuple[int, int]:
        """(episode, index): identifies the chunk within an epoch."""
        return self.episode, self.index


@dataclass(frozen=True)
class PoolOrder:
    """How a consumer orders its frames.

    Attributes:
        pool_size: episodes open at once (>= 1).
        chunk_frames: rows per chunk (with open_chunks >= 1).
        open_chunks: chunks open at once; 0: no chunk level (`EpisodePool`: frames drawn uniformly from the open
            episodes, each decoded on its own).
    """

    pool_size: int
    chunk_frames: int = 0
    open_chunks: int = 0

    def make(self, episodes: np.ndarray, lengths: np.ndarray, rng: np.random.Generator,
             rows: list[np.ndarray] | None = None) -> "EpisodePool | ChunkPool":
        """The consumer's emission order over `episodes` (positions) of `lengths` frames (or `rows` of each)."""
        if self.open_chunks:
            return ChunkPool(episodes, lengths, self.pool_size, self.chunk_frames, self.open_chunks, rng, rows)
        return EpisodePool(episodes, lengths, self.pool_size, rng, rows)


class _Open:
    """An open episode: its chunks not yet opened (next one last), its frames not yet emitted, and its open chunk
    (index, rows, rows in emission order, rows left) or None."""

    __slots__ = ("e", "chunks", "left", "open")

    def __init__(self, e: int, chunks: list[tuple[int, np.ndarray]], left: int):
        self.e, self.chunks, self.left, self.open = e, chunks, left, None


class ChunkPool:
    """Iterator of (episode position, row, last) over a consumer's episodes, like `EpisodePool`; `last` is True
    when that emission used up the episode. After each emission `chunk` is the `Chunk` it came from.

    Two levels: `pool_size` episodes are open (their rows in RAM), and at most `open_chunks` of them are active,
    each with one open chunk. Each emission draws an active episode with probability proportional to its
    frames not yet emitted (as `EpisodePool` draws over its whole pool, so episodes run out together and
    batches mix as many episodes as a uniform draw over their frames would), then a random not-yet-emitted
    row of that episode's open chunk. When a chunk is used up its slot goes to an open episode without an
    open chunk, drawn in proportion to its frames left (the one just closed included), which opens its next
    chunk (chunks in an order drawn at admission). An episode leaves the pool when all its frames are
    emitted, and the next one is admitted, drawn uniformly from the consumer's remaining episodes.

    Args:
        episodes: the consumer's episode positions.
        lengths: frames of each of those episodes (same order).
        pool_size: episodes open at once (>= 1).
        chunk_frames: rows per chunk (>= 1).
        open_chunks: chunks open at once (>= 1).
        rng: the consumer's generator for this epoch.
        rows: per episode (same order), the rows to emit when not all of them (an elastic resume); None: all.

    Attributes:
        admitted: episodes admitted so far.
        row_sets: `rows` as given (read, never written: `dl.plugins.pool.first_draws` shares it with its copy).
        on_admit: called with the episode (position) whenever one is admitted from now on (None: nothing);
            the episodes admitted before it was set are `open_episodes()`.
        chunk: the chunk of the last emission (None before the first).
    """

    def __init__(self, episodes: np.ndarray, lengths: np.ndarray, pool_size: int, chunk_frames: int,
                 open_chunks: int, rng: np.random.Generator, rows: list[np.ndarray] | None = None):
        if pool_size < 1 or chunk_frames < 1 or open_chunks < 1:
            raise ValueError(f"pool_size, chunk_frames and open_chunks must be >= 1, got {pool_size}, "
                             f"{chunk_frames}, {open_chunks}")
        self.on_admit = self.chunk = None
        self.admitted = 0
        self.rng, self.chunk_frames, self.open_chunks = rng, chunk_frames, open_chunks
        self._waiting = rng.permutation(len(episodes))  # admission order (from the end): uniform without replacement
        self._unadmitted = len(episodes)
        self._episodes, self._lengths, self.row_sets = np.asarray(episodes), np.asarray(lengths), rows
        self._open: list[_Open] = [self._admit() for _ in range(min(pool_size, len(episodes)))]
        self._active: list[_Open] = []  # the open episodes with an open chunk, in activation order
        self._activate()

    def _admit(self) -> _Open:
        self._unadmitted -= 1
        e = int(self._waiting[self._unadmitted])
        rows = np.arange(int(self._lengths[e])) if self.row_sets is None else np.sort(self.row_sets[e])
        cuts = np.flatnonzero(np.diff(rows // self.chunk_frames)) + 1
        chunks = [(int(part[0] // self.chunk_frames), part) for part in np.split(rows, cuts) if len(part)]
        order = self.rng.permutation(len(chunks))
        self.admitted += 1
        return _Open(e, [chunks[i] for i in order], len(rows))

    def _activate(self) -> None:
        """Fill the free chunk slots from the open episodes without an open chunk, each drawn in proportion to
        its frames left."""
        while len(self._active) < self.open_chunks:
            idle = [o for o in self._open if o.open is None and o.chunks]
            if not idle:
                return
            owner = idle[draw_weighted(self.rng, [o.left for o in idle])]
            index, rows = owner.chunks.pop()
            owner.open = [index, rows, self.rng.permutation(rows), len(rows)]
            self._active.append(owner)

    def __iter__(self):
        return self

    def __next__(self) -> tuple[int, int, bool]:
        if not self._active:
            raise StopIteration
        owner = self._active[draw_weighted(self.rng, [o.left for o in self._active])]
        index, rows, perm, n = owner.open
        row = int(perm[len(perm) - n])
        owner.open[3] = n - 1
        owner.left -= 1
        episode = int(self._episodes[owner.e])
        closed, last = n == 1, owner.left == 0
        self.chunk = Chunk(episode, index, rows, closed)
        if closed:
            owner.open = None
            self._active.remove(owner)
        admitted = None
        if last:
            where = self._open.index(owner)
            if self._unadmitted:
                self._open[where] = admitted = self._admit()
            else:
                del self._open[where]
        if closed:
            self._activate()
        if admitted is not None and self.on_admit is not None:  # told once it may hold a slot (`read_order`)
            self.on_admit(int(self._episodes[admitted.e]))
        return episode, row, last

    def read_order(self, episode: int) -> list[tuple[int, int, int]]:
        """`(first row, last row, rank)` of each chunk of the open episode at position `episode` that is not used
        up, in the order they open: its open chunk at rank 0, then the others from rank 1; an episode without an
        open chunk starts at rank 1 (it waits for a slot). What a prefetching source fetches first
        (`FileSpan.reads`)."""
        owner = next(o for o in self._open if int(self._episodes[o.e]) == episode)
        chunks = [owner.open[1]] if owner.open is not None else []
        chunks += [rows for _, rows in reversed(owner.chunks)]
        first = 0 if owner.open is not None else 1
        return [(int(rows[0]), int(rows[-1]), first + i) for i, rows in enumerate(chunks)]

    def open_episodes(self) -> list[int]:
        """Positions of the episodes in the pool with frames left."""
        return [int(self._episodes[o.e]) for o in self._open if o.left > 0]
