"""The episode pool's sampling order, without any I/O: which (episode, row) a consumer emits next.

A consumer keeps `pool_size` whole episodes open and emits a frame drawn uniformly at random from all the
not-yet-emitted frames of the pool; when an episode is used up, the next one is admitted, drawn uniformly
from the consumer's remaining episodes. Because the order is computed from counters and the RNG alone, a
resumed consumer replays it to any position without reading or decoding anything."""

import numpy as np


def draw_weighted(rng: np.random.Generator, weights) -> int:
    """An index into `weights` (non-negative integers, positive sum: frames left per episode or chunk), drawn
    with probability proportional to its weight: one `rng.integers` call, so a replay draws the same."""
    cumulative = np.cumsum(weights)
    return int(np.searchsorted(cumulative, rng.integers(cumulative[-1]), side="right"))


class EpisodePool:
    """Iterator of (episode position, row, last) over a consumer's episodes; `last` is True when that
    emission used up the episode (its rows can be dropped).

    Args:
        episodes: the consumer's episode positions.
        lengths: frames of each of those episodes (same order).
        pool_size: episodes open at once (>= 1).
        rng: the consumer's generator for this epoch.
        rows: per episode (same order), the rows to emit, when not all of them (an elastic resume serves
            what is left of an episode); None: rows 0..length-1.

    Attributes:
        admitted: episodes admitted so far.
        row_sets: `rows` as given (read, never written: `dl.plugins.pool.first_draws` shares it with its copy).
        on_admit: called with the episode (position) whenever one is admitted from now on (None: nothing);
            the episodes admitted before it was set are `open_episodes()`.
    """

    def __init__(self, episodes: np.ndarray, lengths: np.ndarray, pool_size: int, rng: np.random.Generator,
                 rows: list[np.ndarray] | None = None):
        self.on_admit = None
        if pool_size < 1:
            raise ValueError(f"episode_pool_size must be >= 1, got {pool_size}")
        self.rng = rng
        self._waiting = rng.permutation(len(episodes))  # admission order (from the end): uniform without replacement
        self._unadmitted = len(episodes)
        self._episodes, self._lengths, self.row_sets = np.asarray(episodes), np.asarray(lengths), rows
        self._slots: list[int] = []  # index into episodes
        self._rows: list[np.ndarray] = []  # each slot's rows in emission order (a permutation)
        self._left = np.zeros(pool_size, dtype=np.int64)  # frames left per slot
        self.admitted = 0
        for _ in range(min(pool_size, len(episodes))):
            self._admit(len(self._slots))

    def _admit(self, slot: int) -> None:
        self._unadmitted -= 1
        e = int(self._waiting[self._unadmitted])
        rows = self.rng.permutation(int(self._lengths[e]) if self.row_sets is None else self.row_sets[e])
        if slot == len(self._slots):
            self._slots.append(e)
            self._rows.append(rows)
        else:
            self._slots[slot], self._rows[slot] = e, rows
        self._left[slot] = len(rows)
        self.admitted += 1
        if self.on_admit is not None:
            self.on_admit(int(self._episodes[e]))

    def __iter__(self):
        return self

    def __next__(self) -> tuple[int, int, bool]:
        left = self._left[: len(self._slots)]
        if not left.any():
            raise StopIteration
        slot = draw_weighted(self.rng, left)
        rows = self._rows[slot]
        row = int(rows[len(rows) - left[slot]])
        left[slot] -= 1
        episode = int(self._episodes[self._slots[slot]])
        last = left[slot] == 0
        if last and self._unadmitted:
            self._admit(slot)
        return episode, row, bool(last)

    def open_episodes(self) -> list[int]:
        """Positions of the episodes in the pool with frames left."""
        return [int(self._episodes[e]) for s, e in enumerate(self._slots) if self._left[s] > 0]
