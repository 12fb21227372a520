"""When a consumer's open episodes and chunks are first drawn, read ahead from the pool's own RNG.

A consumer opens `episode_pool_size` episodes at once and its first batches draw from all of them, so a prefetching
source is told of every one before the first sample. It downloads what they read in the order of the ranks it is
told (`dl.kits.remote.prefetch`: ties in admission order). The emission order is a function of counters and the
consumer's RNG alone (`episode_pool`, `chunk_pool`), so a copy of the pool replays it ahead without reading or
decoding anything, and the source hears of:

- the open episodes in the order they are first drawn. Told in the pool's slot order, the first batch waits for
  most of the open episodes' first bytes, as the episodes it draws first are spread at random over that order. On
  open50 through `bucket` (20 ms, 80 Mbit/s, 2 workers of 21 open episodes) the first batch came after 0.85-0.91 s
  instead of 1.42-1.92 s.
- each chunk's rank as the order of its first draw among all chunks (`ReadAhead.ranked`). Ranked by its number in
  its own episode instead, the source fetched every episode's k-th chunk before any (k+1)-th one, but the pool
  draws episodes in proportion to their frames left: a 580-frame episode reads its chunks twice as fast as a
  290-frame one, and waited behind the shorter ones' chunks while they sat unread.

Reading ahead costs a few microseconds a draw (`benchmarks/results/internals.md`, "Pool"), once per consumer and
epoch, and only when the source will download some of the epoch's bytes
(`dl.contracts.source.Prefetches`); otherwise it is told in slot order, without reads."""

import copy
from dataclasses import dataclass

from .chunk_pool import ChunkPool
from .episode_pool import EpisodePool

DRAWS_PER_EPISODE = 16
"""Draws read ahead per open episode at least: with draws in proportion to frames left, all of them are drawn
within a few draws each (n ln n for n episodes of equal length); one never drawn that far ahead comes last."""
AHEAD_DRAWS = 16384
"""Draws read ahead at least (~0.1 s): a whole epoch of a consumer of open50 with 2 workers (8,500-10,000 frames).
Past it chunks rank by their number in their episode, after all those read ahead, and `Source.expect` brings
each episode's next chunk forward as its current one opens."""


@dataclass(frozen=True)
class ReadAhead:
    """What a copy of the pool drew ahead.

    Attributes:
        episodes: the positions of the pool's open episodes in the order of their first emission (those not drawn
            within the horizon last, in their pool order).
        chunks: `(episode position, chunk index)` -> the order of the chunk's first draw among the chunks drawn
            within the horizon (0, 1, ...; those of episodes admitted later included).
    """

    episodes: list[int]
    chunks: dict[tuple[int, int], int]

    def ranked(self, episode: int, order: list[tuple[int, int, int]], chunk_frames: int) -> list[tuple[int, int, int]]:
        """`order` (`ChunkPool.read_order(episode)`: `(first row, last row, rank)`) with the ranks of its chunks
        after the open one (rank 0, kept) replaced by 1 + the order of their first draw, and by 1 + the chunks
        read ahead + their rank for those not drawn within the horizon."""
        past = len(self.chunks)
        return [(first, last, 0 if rank == 0 else 1 + self.chunks.get((episode, first // chunk_frames), past + rank))
                for first, last, rank in order]


def read_ahead(pool: EpisodePool | ChunkPool) -> ReadAhead:
    """Read `max(AHEAD_DRAWS, DRAWS_PER_EPISODE x open episodes)` emissions ahead on a copy of `pool` (fewer when
    its epoch ends first; an `EpisodePool`, which has no chunks, stops once every open episode is drawn); `pool`
    itself, its RNG included, is left as it was. Call it before setting the pool's `on_admit`: the copy's draws would
    call it."""
    waiting = set(pool.open_episodes())
    first: dict[int, int] = {}
    chunks: dict[tuple[int, int], int] = {}
    rows = pool.row_sets  # an elastic segment's rows (`segments.RowsLeft`, over the epoch's mask): shared, not copied
    ahead = copy.deepcopy(pool, {id(rows): rows})
    horizon = max(AHEAD_DRAWS, DRAWS_PER_EPISODE * len(waiting))
    chunked = isinstance(ahead, ChunkPool)
    for _ in range(horizon):
        try:
            episode, _, _ = next(ahead)
        except StopIteration:
            break
        if episode in waiting:  # not one admitted meanwhile (after an open episode ran out)
            first.setdefault(episode, len(first))
        if chunked:
            chunks.setdefault(ahead.chunk.key, len(chunks))
        elif len(first) == len(waiting):
            break
    return ReadAhead(sorted(pool.open_episodes(), key=lambda e: first.get(e, len(waiting))), chunks)
