"""How a mixture samples: quotas apportioned exactly, each sample's member drawn by weight (shares within a binomial
bound of the weights), every member epoch read exactly once (oversampled members restart theirs, reshuffled; the
epoch's last partial pass repeats no frame), the same order for the same seed."""

import itertools
import math
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from mixture_helpers import every_index, members_of, mixture, per_member

import dl
from dl.mixture.quotas import apportion, epoch_quotas, member_weights, pass_quotas

# 3 DataLoader workers on a 2-core machine are intended here (world size 3 x 2 workers)
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create .* worker processes",
                                        "ignore:mixture. ranks get")
PROPERTY = settings(max_examples=examples(12), deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@given(total=st.integers(0, 10_000), shares=st.lists(st.integers(0, 500), min_size=1, max_size=12))
def test_apportion_sums_and_stays_within_shares(total, shares):
    if sum(shares) == 0:
        total = 0
    parts = apportion(total, shares)
    assert sum(parts) == total
    for part, share in zip(parts, shares, strict=True):
        assert abs(part - total * share / sum(shares or [1])) < 1 if sum(shares) else part == 0
        if total <= sum(shares):
            assert part <= share


def test_quotas_and_passes():
    assert epoch_quotas(member_weights("frames", [76, 48], [5, 3], ["a", "b"]), 124, [76, 48], True) == [76, 48]
    assert epoch_quotas(member_weights([0.3, 0.7], [76, 48], [5, 3], ["a", "b"]), 200, [76, 48], False) == [60, 140]
    assert member_weights("episodes", [76, 48], [5, 3], ["a", "b"]) == [5 / 8, 3 / 8]
    # the default epoch reads every member whole at least once: the one with the most frames per weight exactly once
    assert epoch_quotas(member_weights([0.3, 0.7], [76, 48], [5, 3], ["a", "b"]), None, [76, 48], False) == [76, 177]
    assert epoch_quotas(member_weights([0.7, 0.3], [76, 48], [5, 3], ["a", "b"]), None, [76, 48], False) == [112, 48]
    assert epoch_quotas(member_weights("frames", [76, 48], [5, 3], ["a", "b"]), None, [76, 48], True) == [76, 48]
    assert pass_quotas(140, 48) == [48, 48, 44] and pass_quotas(60, 76) == [60] and pass_quotas(96, 48) == [48, 48]


def pairs_of_epochs(mix, world_size: int, num_workers: int, epochs: int = 1, batch_size: int = 4):
    """Per epoch, every rank's (dataset_index, index) pairs together."""
    out = [[] for _ in range(epochs)]
    for rank in range(world_size):
        loader = dl.make_dataloader(mix(rank, world_size), batch_size=batch_size, num_workers=num_workers,
                                    persistent_workers=num_workers > 0)
        for e in range(epochs):
            out[e] += members_of(loader)
    return out


@pytest.mark.parametrize("world_size,num_workers", [(1, 0), (2, 2), (3, 1)])
def test_every_member_epoch_exactly_once(mixture_roots, world_size, num_workers):
    """Quotas 2.4x tabular_small's frames and 0.6x tabular's: each frame of the small member comes 2 or 3 times an
    epoch, each of the large one's at most once, and exactly the quotas are served (all ranks together)."""
    roots = [mixture_roots["tabular"], mixture_roots["tabular_small"]]
    probe = mixture(roots, names=["t", "s"])
    frames = probe.frames
    quotas = [round(0.6 * frames[0]), round(2.4 * frames[1])]

    def mix(rank, world):
        return mixture(roots, weights=quotas, samples_per_epoch=sum(quotas), names=["t", "s"], seed=9, rank=rank,
                       world_size=world)

    epochs = pairs_of_epochs(mix, world_size, num_workers, epochs=2)
    subsets = []
    for pairs in epochs:
        counts = per_member(pairs)
        assert [sum(counts[m].values()) for m in (0, 1)] == quotas
        whole, rest = divmod(quotas[1], frames[1])
        assert set(counts[1]) == set(every_index(probe.members[1]))
        assert Counter(counts[1].values()) == Counter({whole + 1: rest, whole: frames[1] - rest})
        assert max(counts[0].values()) == 1 and len(counts[0]) == quotas[0]
        subsets.append(set(counts[0]))
    assert subsets[0] != subsets[1], "the next epoch read the undersampled member's same frames"


@PROPERTY
@given(weights=st.lists(st.floats(0.05, 1.0), min_size=2, max_size=3), seed=st.integers(0, 2**16),
       samples=st.integers(60, 240))
def test_shares_follow_the_weights(mixture_roots, weights, seed, samples):
    """In any prefix of n samples, member m's count is within 4 binomial standard deviations (+1) of n x weight_m;
    over the epoch, exactly its quota."""
    roots = [mixture_roots["tabular"], mixture_roots["tabular_small"], mixture_roots["tabular"]][:len(weights)]
    mix = mixture(roots, weights=weights, samples_per_epoch=samples, seed=seed, names=["t", "s", "t2"][:len(weights)])
    drawn = [d for d, _ in members_of(dl.make_dataloader(mix, batch_size=8))]
    assert Counter(drawn) == Counter({m: q for m, q in enumerate(mix.quotas) if q})
    for n in (samples // 4, samples // 2, samples):
        for m, w in enumerate(mix.weights):
            k = drawn[:n].count(m)
            assert abs(k - n * w) <= 4 * math.sqrt(n * w * (1 - w)) + 1, (m, n, k, w)


def test_same_seed_same_order_other_seed_other_order(mixture_roots):
    roots = [mixture_roots["tabular"], mixture_roots["tabular_small"]]

    def order(seed, num_workers):
        mix = mixture(roots, weights=[0.5, 0.5], samples_per_epoch=90, seed=seed, names=["t", "s"])
        return members_of(dl.make_dataloader(mix, batch_size=4, num_workers=num_workers))

    for num_workers in (0, 2):
        assert order(3, num_workers) == order(3, num_workers)
    assert [d for d, _ in order(3, 0)] != [d for d, _ in order(4, 0)]


def test_frames_weights_serve_every_frame_once_in_a_random_interleave(mixture_roots):
    """The default: as if the datasets were concatenated and shuffled; the next epoch in another order."""
    roots = [mixture_roots["tabular"], mixture_roots["tabular_small"]]
    mix = mixture(roots, names=["t", "s"], seed=1)
    loader = dl.make_dataloader(mix, batch_size=4, num_workers=2, persistent_workers=True)
    first, second = members_of(loader), members_of(loader)
    expected = Counter(itertools.chain(((0, i) for i in every_index(mix.members[0])),
                                       ((1, i) for i in every_index(mix.members[1]))))
    assert Counter(first) == expected == Counter(second)
    assert first != second
    assert len({d for d, _ in first[:20]}) == 2, "the members are not interleaved"


def test_an_undersampled_pool_member_admits_only_what_its_share_reads(mixture_roots, in_memory):
    """A prefetching source (`Prefetches.admit`: it starts fetching the episode) hears of a member's episode only
    when the member's pool opens it, as the mixture draws from it: 6 samples of tabular's 61 frames open 1 or 2 of
    its 7 episodes, not all of them. The member is read through `bucket` from fsspec's in-memory filesystem."""
    small = dl.make_dataset(str(mixture_roots["tabular_small"]), loader="pool")
    large = dl.make_dataset(in_memory(mixture_roots["tabular"], "tabular"), source="bucket", loader="pool",
                            loader_options={"episode_pool_size": 1})
    admitted, admit = [], large.meta.source.admit
    large.meta.source.admit = lambda key, files: (admitted.append(key), admit(key, files))  # no workers
    mix = dl.make_mixture([small, large], weights=[0.9, 0.1], samples_per_epoch=60, names=["s", "t"])
    assert mix.quotas == [54, 6]
    read = set()
    for batch in dl.make_dataloader(mix, batch_size=4):
        read |= {int(e) for d, e in zip(batch["dataset_index"], batch["episode_index"], strict=True) if d == 1}
    assert set(read) <= set(admitted) and len(admitted) <= len(read) + 1 < len(large.episodes)
