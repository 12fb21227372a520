"""`dl.format.locate.rows_of` (every episode of a data file placed in a few passes over its rows) against `rows_in`
(one episode at a time, which says what is wrong): the same answer for every episode, on files as LeRobot writes
them and with the flaws the checks exist for (an episode split in two runs, rows out of order, an index that skips,
repeats or restarts, meta/episodes off by a row)."""

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from dl.format.locate import rows_in, rows_of

FLAWS = ("none", "moved row", "changed index", "rows shuffled", "index shuffled", "meta off by one", "index restarts")


@settings(max_examples=examples(400), deadline=None, derandomize=True, database=None)
@given(lengths=st.lists(st.integers(0, 6), min_size=1, max_size=8), flaw=st.sampled_from(FLAWS),
       seed=st.integers(0, 2**16))
def test_every_episode_is_placed_as_rows_in_places_it(lengths, flaw, seed):
    rng = np.random.default_rng(seed)
    owners = np.repeat(np.arange(len(lengths)) + 10, lengths)
    index = np.arange(len(owners)) + 100
    if flaw == "moved row" and len(owners):
        owners[rng.integers(len(owners))] = rng.integers(10, 10 + len(lengths))
    if flaw == "changed index" and len(owners):
        index[rng.integers(len(index))] = rng.integers(95, 103 + len(index))
    if flaw == "rows shuffled":
        owners = owners[rng.permutation(len(owners))]
    if flaw == "index shuffled":
        index = index[rng.permutation(len(index))]
    starts = np.concatenate([[0], np.cumsum(lengths)])
    if flaw == "index restarts":  # files concatenated without renumbering: two episodes claim the same indices
        index[starts[len(lengths) // 2]:] -= starts[len(lengths) // 2]
    episodes = []
    for k, length in enumerate(lengths):
        first = (int(index[starts[k]]) if flaw == "index restarts" and length else 100 + int(starts[k])) + (
            int(rng.integers(-1, 2)) if flaw == "meta off by one" else 0)
        episodes.append(SimpleNamespace(index=10 + k, dataset_from_index=first, dataset_to_index=first + length,
                                        length=length))
    chosen = [ep for ep in episodes if rng.random() < 0.7]
    assert rows_of(index, owners, chosen) == {ep.index: rows_in(index, owners, ep) for ep in chosen}
