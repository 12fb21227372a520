"""The pool loader's exact mid-epoch resume from counters (dl.dataloader.resume): resumed streams equal the tail of
uninterrupted ones, across workers and ranks; changed configurations are refused."""

import itertools
import json
import math
import random
from collections import Counter

import pytest
import torch
import torch.utils.data
from pool_helpers import CAM0, TABULAR, consume_loader, flat, index_batches, pool, resumable, tagged

import dl
from dl.contracts.errors import ResumeError
from dl.dataloader.resume import resume_point
from dl.testing.synthetic import read_frame_code

# --------------------------------------------------------------------------------------- resume



def assert_same_batches(got, expected):
    assert len(got) == len(expected)
    for n, ((_, a), (_, b)) in enumerate(zip(got, expected, strict=True)):
        assert a["index"].tolist() == b["index"].tolist(), n
        assert set(a) == set(b)
        for key, value in a.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(value, b[key]), (n, key)
            else:
                assert value == b[key], (n, key)
        if CAM0 in a:
            assert [read_frame_code(f) for f in a[CAM0]] == [(i, 0) for i in a["index"].tolist()], n


def cut_and_resume(root, num_workers, batch_size, cut, **kwargs):
    """(uninterrupted batches, state after `cut` batches, batches of a NEW loader resumed from it)."""
    full = consume_loader(resumable(root, num_workers, batch_size, **kwargs))
    loader = resumable(root, num_workers, batch_size, **kwargs)
    head = []
    for batch in loader:
        head.append(batch)
        if len(head) == cut:
            break
    state = loader.state_dict()
    assert_same_batches(head, full[:cut])
    resumed = resumable(root, num_workers, batch_size, **kwargs)
    resumed.load_state_dict(state)
    return full, state, consume_loader(resumed)


def first_exhaustion(batches):
    """Position just after the batch with which the first worker ran out (from a tagged uninterrupted run)."""
    last = {}
    for n, (worker, _) in enumerate(batches):
        last[worker] = n
    return min(last.values()) + 1


@pytest.mark.parametrize(("num_workers", "cut"), [(0, 5), (2, 1), (2, 7), (3, 5)])
def test_exact_resume_mid_epoch(video_root, num_workers, cut):
    root = video_root
    full, state, tail = cut_and_resume(root, num_workers, 4, cut, episode_pool_size=2, seed=3)
    assert 0 < cut < len(full)
    assert state["epoch"] == 0 and state["batches_consumed"] == cut
    assert_same_batches(tail, full[cut:])


@pytest.mark.slow
@pytest.mark.parametrize("num_workers", [2, 3])
def test_exact_resume_after_a_worker_ran_out(video_root, num_workers):
    root = video_root
    full = consume_loader(resumable(root, num_workers, 4, episode_pool_size=2, seed=3))
    counts = Counter(worker for worker, _ in full)
    assert len(set(counts.values())) > 1  # precondition: uneven worker batch counts
    cut = first_exhaustion(full) + 1
    assert cut < len(full)  # precondition: some worker is exhausted before the cut, others are not
    _, state, tail = cut_and_resume(root, num_workers, 4, cut, episode_pool_size=2, seed=3)
    assert state["batches_consumed"] == cut
    assert_same_batches(tail, full[cut:])


def test_exact_resume_with_an_idle_worker(video_root):
    """2 episodes for 3 workers: one worker has nothing at all this epoch."""
    root = video_root
    full, _, tail = cut_and_resume(root, 3, 4, 3, episodes=[0, 1], episode_pool_size=1, seed=2)
    assert len({worker for worker, _ in full}) == 2
    assert_same_batches(tail, full[3:])


def test_resume_same_state_serves_every_rank(video_root):
    root = video_root
    options = dict(episode_pool_size=2, seed=4, world_size=2)
    full = {rank: consume_loader(resumable(root, 2, 3, rank=rank, **options)) for rank in range(2)}
    cut = 4
    _, state, _ = cut_and_resume(root, 2, 3, cut, rank=0, **options)
    for rank in range(2):
        assert full[rank][cut:]  # both ranks still have batches after the cut
        loader = resumable(root, 2, 3, rank=rank, **options)
        loader.load_state_dict(state)
        assert_same_batches(consume_loader(loader), full[rank][cut:])


def test_state_dict_holds_counters_only(dataset_factory):
    root = dataset_factory(**TABULAR)
    loader = resumable(root, 0, 4, episode_pool_size=2)
    iterator = iter(loader)
    next(iterator)
    next(iterator)
    state = loader.state_dict()
    assert set(state) == {"epoch", "batches_consumed", "batch_size", "invariants", "rank", "shape", "segments"}
    assert (state["epoch"], state["batches_consumed"], state["batch_size"], state["rank"]) == (0, 2, 4, 0)
    assert state["invariants"]["episode_pool_size"] == 2 and state["segments"] == []
    assert state["shape"] == {"world_size": 1, "num_workers": 1, "batch_size": 4}
    assert json.loads(json.dumps(state)) == state


@pytest.mark.parametrize(("change", "named"), [
    (dict(episode_pool_size=3), "episode_pool_size"), (dict(episodes=[0, 1, 2, 3]), "episodes"),
    (dict(seed=1), "seed"), (dict(drop_last=True), "drop_last"),
], ids=["pool_size", "episodes", "seed", "drop_last"])
def test_resume_refuses_a_changed_configuration(dataset_factory, change, named):
    root = dataset_factory(**TABULAR)
    base = dict(num_workers=2, batch_size=4, episode_pool_size=2, seed=0, episodes=None)
    saved = resumable(root, **base)
    iterator = iter(saved)
    next(iterator)
    state = saved.state_dict()
    resumable(root, **base).load_state_dict(state)  # the same configuration is accepted
    with pytest.raises(ResumeError, match=f"does not fit this loader \\({named}: saved "):
        resumable(root, **{**base, **change}).load_state_dict(state)


@pytest.mark.parametrize("change", [dict(num_workers=1), dict(world_size=2, rank=1), dict(batch_size=5)],
                         ids=["num_workers", "world_size", "batch_size"])
def test_resume_accepts_another_shape(dataset_factory, change):
    """World size, workers and batch size are the shape: another one resumes elastically (exactly-once is
    the loader suite's elastic property test)."""
    root = dataset_factory(**TABULAR)
    base = dict(num_workers=2, batch_size=4, episode_pool_size=2, seed=0)
    saved = resumable(root, **base)
    head = [batch["index"].tolist() for _, batch in itertools.islice(saved, 2)]
    resumed = resumable(root, **{**base, **change})
    resumed.load_state_dict(saved.state_dict())
    assert resumed.dataset.resume_position().segments[0].batches_consumed == (2,)
    tail = [i for _, batch in resumed for i in batch["index"].tolist()]
    assert not set(tail) & set(flat(head))


def test_legacy_state_without_a_shape_still_loads(dataset_factory):
    """A state saved before elastic resume (world size, workers and batch size among the invariants)."""
    root = dataset_factory(**TABULAR)
    full = index_batches(resumable(root, 2, 4, episode_pool_size=2))
    legacy = {"epoch": 0, "batches_consumed": 3, "batch_size": 4,
              "invariants": {**resumable(root, 2, 4, episode_pool_size=2).state_dict()["invariants"],
                             "world_size": 1, "num_workers": 2, "batch_size": 4}}
    resumed = resumable(root, 2, 4, episode_pool_size=2)
    resumed.load_state_dict(legacy)
    assert index_batches(resumed) == full[3:]


def test_resume_accepts_another_rank_of_the_same_world(dataset_factory):
    """Rank 0's state after 2 batches resumes rank 1 two batches into its own stream (ranks step in lockstep)."""
    root = dataset_factory(**TABULAR)
    rank0 = resumable(root, 0, 4, rank=0, world_size=2)
    batches = iter(rank0)
    next(batches), next(batches)
    state = rank0.state_dict()
    whole = index_batches(resumable(root, 0, 4, rank=1, world_size=2))
    resumed = resumable(root, 0, 4, rank=1, world_size=2)
    resumed.load_state_dict(state)
    assert len(whole) > 2 and index_batches(resumed) == whole[2:]


@pytest.mark.parametrize(("num_workers", "persistent"), [
    (0, False),
    (2, False),
    (2, True),
], ids=["main-process", "workers", "persistent-workers"])
def test_epoch_after_a_resumed_epoch_is_whole(dataset_factory, persistent_loaders, num_workers, persistent):
    root = dataset_factory(**TABULAR)

    def loader():
        made = dl.ResumableDataLoader(pool(root, episode_pool_size=2), batch_size=4, num_workers=num_workers,
                                      collate_fn=tagged, persistent_workers=persistent)
        persistent_loaders.append(made)
        return made

    reference = loader()
    epochs = [consume_loader(reference) for _ in range(2)]
    cut = loader()
    for n, _ in enumerate(cut, 1):
        if n == 3:
            break
    resumed = loader()
    resumed.load_state_dict(cut.state_dict())
    assert_same_batches(consume_loader(resumed), epochs[0][3:])
    # a state taken after an epoch ran out resumes at the start of the next, not at its empty tail
    assert (resumed.state_dict()["epoch"], resumed.state_dict()["batches_consumed"]) == (1, 0)
    next_epoch = consume_loader(resumed)  # epoch 1, from its start
    assert_same_batches(next_epoch, epochs[1])
    assert (resumed.state_dict()["epoch"], resumed.state_dict()["batches_consumed"]) == (2, 0)


def simulate_dataloader(batch_size, worker_samples):
    """The worker of each batch a DataLoader delivers from an IterableDataset: workers cycled in order,
    exhausted workers skipped; a worker's last batch holds its remainder."""
    left = [math.ceil(n / batch_size) for n in worker_samples]
    order = []
    while any(left):
        for w in range(len(left)):
            if left[w]:
                order.append(w)
                left[w] -= 1
    return order


def test_resume_point_matches_a_brute_force_dataloader():
    rng = random.Random(0)
    for _ in range(400):
        num_workers = rng.randint(1, 5)
        samples = [rng.choice([0, rng.randint(1, 9), rng.randint(1, 60)]) for _ in range(num_workers)]
        batch_size = rng.randint(1, 8)
        order = simulate_dataloader(batch_size, samples)
        for cut in range(len(order) + 1):
            produced, next_worker = resume_point(cut, batch_size, samples)
            taken = Counter(order[:cut])
            assert produced == [min(taken[w] * batch_size, n) for w, n in enumerate(samples)], (samples, cut)
            assert 0 <= next_worker < num_workers
            # a resumed DataLoader starts its cycle at resumed worker 0, who plays worker `next_worker`:
            # its order (exhausted workers skipped) must be the rest of the uninterrupted order
            left = [n - p for n, p in zip(samples, produced, strict=True)]
            roles = [(i + next_worker) % num_workers for i in range(num_workers)]
            resumed = [roles[i] for i in simulate_dataloader(batch_size, [left[r] for r in roles])]
            assert resumed == order[cut:], (samples, batch_size, cut, next_worker)
            if cut < len(order):  # the first live worker from next_worker on is the one delivering next
                live = [(next_worker + j) % num_workers for j in range(num_workers)]
                assert next(w for w in live if left[w]) == order[cut]
        with pytest.raises(ResumeError):
            resume_point(len(order) + 1, batch_size, samples)


def test_resume_point_spelled_out():
    # 2 workers, batches of 4: worker 0 has 2 batches (8 samples), worker 1 has 4 (13 samples, last of 1)
    assert resume_point(0, 4, [8, 13]) == ([0, 0], 0)
    assert resume_point(3, 4, [8, 13]) == ([8, 4], 1)
    assert resume_point(4, 4, [8, 13]) == ([8, 8], 0)  # worker 0 is done: a resumed worker 0 plays it
    assert resume_point(6, 4, [8, 13]) == ([8, 13], 0)
