"""A mixture resumes exactly (same shape: sample for sample) and elastically (another world size, worker count or
batch size: the rest of the epoch exactly once per member epoch), its own state included: which member each upcoming
sample comes from is replayed from counters, as each member's order is."""

import itertools
import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from mixture_helpers import TO_A, every_index, members_of, per_member

import dl
from dl.contracts.errors import ResumeError
from dl.dataloader.elastic import merge_states

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create .* worker processes",
                                        "ignore:mixture. ranks get", "ignore:pool loader. ranks get",
                                        "ignore:mixture. rank .* has no samples")
CUTS = settings(max_examples=examples(8), deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
WEIGHTS = [0.35, 0.65]
SAMPLES = 150
"""tabular (61 frames) read 0.87x an epoch (in part), tabular_small (21 frames) 4.6x: both cases in one mixture."""


def make(roots, rank=None, world_size=None, seed=4, weights=WEIGHTS, pool_size=2):
    """A pool member and a map member, weighted."""
    pool = dl.make_dataset(str(roots["tabular"]), loader="pool", seed=seed, loader_options={"episode_pool_size":
                                                                                             pool_size})
    plain = dl.make_dataset(str(roots["tabular_small"]), loader="map", seed=seed + 1)
    return dl.make_mixture([pool, plain], weights, names=["pool", "map"], samples_per_epoch=SAMPLES, seed=seed,
                           rank=rank, world_size=world_size)


def batches_of(loader, count=None):
    return members_of(itertools.islice(loader, count) if count is not None else loader)


@CUTS
@given(data=st.data(), num_workers=st.sampled_from([0, 2]), epoch=st.integers(0, 1))
def test_exact_resume(mixture_roots, data, num_workers, epoch):
    whole = dl.make_dataloader(make(mixture_roots), batch_size=4, num_workers=num_workers)
    for _ in range(epoch):
        batches_of(whole)
    expected = list(whole)
    following = batches_of(whole)
    cut = data.draw(st.integers(0, len(expected)), label="cut (batches)")
    interrupted = dl.make_dataloader(make(mixture_roots), batch_size=4, num_workers=num_workers)
    for _ in range(epoch):
        batches_of(interrupted)
    got = batches_of(interrupted, cut)
    state = json.loads(json.dumps(interrupted.state_dict()))
    del interrupted
    resumed = dl.make_dataloader(make(mixture_roots), batch_size=4, num_workers=num_workers)
    resumed.load_state_dict(state)
    assert got + batches_of(resumed) == members_of(expected)
    assert batches_of(resumed) == following, "the epoch after the resumed one differs"


def check_epoch(pairs, mix):
    """Each member's quota served; each whole member epoch exactly once, the partial one without repeats."""
    counts = per_member(pairs)
    for m, (quota, frames) in enumerate(zip(mix.quotas, mix.frames, strict=True)):
        whole, rest = divmod(quota, frames)
        assert sum(counts[m].values()) == quota, f"member {m} served {sum(counts[m].values())} of {quota}"
        assert set(counts[m].values()) <= {whole, whole + 1}
        if whole:
            assert set(counts[m]) == set(every_index(mix.members[m])), f"member {m}: a whole epoch lacks frames"
        assert sum(1 for n in counts[m].values() if n == whole + 1) == rest


@CUTS
@given(old=st.tuples(st.integers(1, 3), st.integers(0, 2), st.integers(2, 3)),
       new=st.tuples(st.integers(1, 3), st.integers(0, 2), st.integers(2, 4)),
       cuts=st.lists(st.integers(0, 12), min_size=3, max_size=3), seed=st.integers(0, 2**16))
@example(old=(1, 2, 3), new=(2, 0, 4), cuts=[5, 0, 0], seed=1)  # 2 workers stopped at an odd batch
@example(old=(2, 2, 2), new=(3, 1, 3), cuts=[7, 12, 0], seed=2)  # ranks at different batches, 2 workers each
def test_elastic_resume_exactly_once(mixture_roots, old, new, cuts, seed):
    """W ranks x N workers (batch B), each rank cut at its own batch, merged -> W' x N' (batch B')."""
    (world, workers, batch), (world2, workers2, batch2) = old, new
    emitted, states = [], []
    for rank in range(world):
        loader = dl.make_dataloader(make(mixture_roots, rank, world, seed), batch_size=batch, num_workers=workers)
        emitted += batches_of(loader, cuts[rank])
        states.append(loader.state_dict())
    state = merge_states(states)

    def resumed(rank):
        loader = dl.make_dataloader(make(mixture_roots, rank, world2, seed), batch_size=batch2, num_workers=workers2)
        loader.load_state_dict(state)
        return loader

    rest, following = [], []
    for rank in range(world2):
        loader = resumed(rank)
        rest.append(batches_of(loader))
        following += batches_of(loader)
    mix = make(mixture_roots, seed=seed)
    check_epoch(emitted + [p for r in rest for p in r], mix)
    assert batches_of(resumed(0)) == rest[0], "the resumed order is not deterministic"
    check_epoch(following, mix)


def test_elastic_resume_of_video_members_through_pool_chunks(mixture_roots):
    """Pool members decoding in chunks, cameras renamed: 1 rank x 2 workers -> 2 ranks x 1 worker, frames checked."""
    from dl.testing.synthetic import read_frame_code

    def mix(rank, world):
        return dl.make_mixture(
            [{"root": str(mixture_roots["a"]), "loader": "pool", "name": "a"},
             {"root": str(mixture_roots["b"]), "loader": "pool", "rename": TO_A, "name": "b"}],
            [0.3, 0.7], samples_per_epoch=120, features=["observation.images.cam0"], image_dtype="uint8",
            rank=rank, world_size=world, seed=2)

    loader = dl.make_dataloader(mix(0, 1), batch_size=5, num_workers=2)
    emitted = batches_of(loader, 7)
    state = loader.state_dict()
    rest = []
    for rank in range(2):
        resumed = dl.make_dataloader(mix(rank, 2), batch_size=3, num_workers=1)
        resumed.load_state_dict(state)
        for batch in resumed:
            assert [read_frame_code(f)[0] for f in batch["observation.images.cam0"]] == batch["index"].tolist()
            rest += members_of([batch])
    check_epoch(emitted + rest, mix(0, 1))


def test_a_changed_mixture_is_refused(mixture_roots):
    loader = dl.make_dataloader(make(mixture_roots), batch_size=4)
    next(iter(loader))
    state = loader.state_dict()
    other = dl.make_dataloader(make(mixture_roots, weights=[0.5, 0.5]), batch_size=4)
    with pytest.raises(ResumeError, match=r"quotas: saved \[53, 97\], now \[75, 75\]"):
        other.load_state_dict(state)
    with pytest.raises(ResumeError, match="member_invariants"):
        dl.make_dataloader(make(mixture_roots, pool_size=3), batch_size=4).load_state_dict(state)
    assert Counter(d for d, _ in batches_of(other)) == Counter({0: 75, 1: 75})
