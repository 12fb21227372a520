"""In which order a consumer's open episodes are first drawn, read ahead from the pool's own RNG.

A consumer opens `episode_pool_size` episodes at once and its first batches draw from all of them, so a prefetching
source is told of every one before the first sample. It downloads what they read first in the order it is told
(`dl.kits.remote.piece_order`: ties in admission order); told in the pool's slot order, the first batch waits for
most of the open episodes' first bytes, as the episodes it draws first are spread at random over that order. The
emission order is a function of counters and the consumer's RNG alone (`episode_pool`, `chunk_pool`), so a copy of
the pool replays it ahead without reading or decoding anything, and the source is told of the episodes in the
order they are drawn. On open50 through `bucket` (20 ms, 80 Mbit/s, 2 workers of 21 open episodes) the first batch
came after 0.85-0.91 s instead of 1.42-1.92 s. The copy costs 5 ms for 32 open episodes, 0.4 s for 1,000 with
chunks, once per consumer and epoch; a local source, which prefetches nothing, is told in slot order."""

import copy

from .chunk_pool import ChunkPool
from .episode_pool import EpisodePool

DRAWS_PER_EPISODE = 16
"""How far ahead the order is read, in draws per open episode: with draws in proportion to frames left, all of
them are drawn within a few draws each (n ln n for n episodes of equal length); one never drawn that far ahead
comes last."""


def first_draw_order(pool: EpisodePool | ChunkPool) -> list[int]:
    """The positions of `pool.open_episodes()` in the order of their first emission from now on (the ones not
    drawn within `DRAWS_PER_EPISODE` draws each last, in their pool order), read from a copy of `pool`: `pool`
    itself, its RNG included, is left as it was. Call it before setting the pool's callbacks (`on_admit`,
    `on_open`): the copy's draws would call them."""
    waiting = set(pool.open_episodes())
    order: dict[int, int] = {}
    rows = pool._row_sets  # an elastic segment's rows (`segments.RowsLeft`, over the epoch's mask): read, never written
    ahead = copy.deepcopy(pool, {id(rows): rows})
    for _ in range(DRAWS_PER_EPISODE * len(waiting)):
        try:
            episode, _, _ = next(ahead)
        except StopIteration:
            break
        if episode in waiting:  # not one admitted meanwhile (after an open episode ran out)
            order.setdefault(episode, len(order))
            if len(order) == len(waiting):
                break
    return sorted(pool.open_episodes(), key=lambda e: order.get(e, len(waiting)))
