"""dl.dataloader.elastic: merging the ranks' states, and the position a loader of another (or the same) shape
resumes from; dl.bench.resources: what a run asks of a cluster."""

import pytest

from dl.bench.resources import run_resources
from dl.bench.spec import RunSpec
from dl.contracts.errors import DlError, ResumeError
from dl.contracts.resume import ResumePosition, Segment
from dl.dataloader.elastic import merge_states, position_from_state

SHAPE = {"world_size": 2, "num_workers": 2, "batch_size": 4}


def state(rank, epoch, batches, segments=()):
    return {"epoch": epoch, "batches_consumed": batches, "batch_size": 4, "invariants": {"seed": 0}, "rank": rank,
            "shape": SHAPE, "segments": list(segments)}


def test_merge_lists_each_ranks_batches_and_marks_a_finished_rank():
    merged = merge_states([state(1, 3, 0), state(0, 2, 7)])  # rank 1 ran out of epoch 2 and is at 3/0
    assert merged["epoch"] == 2 and merged["batches_consumed"] == [7, None] and "rank" not in merged


@pytest.mark.parametrize(("states", "message"), [
    ([state(0, 0, 1)], "one state per rank of world size 2; got ranks \\[0\\]"),
    ([state(0, 0, 1), state(0, 0, 1)], "got ranks \\[0, 0\\]"),
    ([state(0, 0, 1), {**state(1, 0, 1), "invariants": {"seed": 1}}], "differ in invariants"),
    ([state(0, 0, 1), state(1, 1, 2)], "more than one epoch apart"),
    ([state(0, 0, 1), state(1, 0, 1, [{"shape": SHAPE, "batches_consumed": [1, 1]}])], "different histories"),
])
def test_merge_refuses_inconsistent_states(states, message):
    with pytest.raises(ResumeError, match=message):
        merge_states(states)


def test_same_shape_continues_this_ranks_count():
    merged = merge_states([state(0, 2, 7), state(1, 2, 5)])
    assert position_from_state(merged, 1, SHAPE) == ResumePosition(2, 5, 4, ())
    assert position_from_state(state(0, 2, 7), 1, SHAPE) == ResumePosition(2, 7, 4, ())  # lockstep assumption


def test_another_shape_ends_the_segment():
    merged = merge_states([state(0, 2, 7), state(1, 3, 0)])
    other = {"world_size": 1, "num_workers": 1, "batch_size": 8}
    assert position_from_state(merged, 0, other) == ResumePosition(2, 0, 8, (Segment(SHAPE, (7, None)),))
    # nothing read in the saved shape: no segment left behind
    assert position_from_state(state(0, 3, 0), 0, other) == ResumePosition(3, 0, 8, ())


def test_a_segment_lists_every_rank():
    with pytest.raises(ResumeError, match="world size 2 lists 1 ranks"):
        Segment(SHAPE, (3,))


@pytest.mark.parametrize(("world", "given", "expected"), [
    (1, {}, {"nodes": 1, "tasks_per_node": 1, "cpus_per_task": 3}),
    (4, {"nodes": 2}, {"nodes": 2, "tasks_per_node": 2, "cpus_per_task": 3}),
    (2, {"tasks_per_node": 1, "mem": "8G", "time": "01:00:00", "gpus": 1},
     {"nodes": 2, "tasks_per_node": 1, "cpus_per_task": 3, "mem": "8G", "time": "01:00:00", "gpus": 1}),
])
def test_resources_are_completed_from_the_world_size(world, given, expected):
    assert run_resources(RunSpec(root="/d", world_size=world, num_workers=2, resources=given)) == expected


@pytest.mark.parametrize(("world", "given", "message"), [
    (2, {"nodes": 3}, "world size 2 cannot be spread as nodes=3"),
    (2, {"nodes": 2, "tasks_per_node": 2}, "nodes x tasks_per_node must equal"),
    (1, {"gpu": 1}, "unknown resource\\(s\\) gpu"),
    (1, {"cpus_per_task": 0}, "cpus_per_task=0 must be an integer >= 1"),
    (1, {"mem": "lots"}, "mem='lots'"),
    (1, {"time": "soon"}, "time='soon'"),
])
def test_bad_resources_are_refused(world, given, message):
    with pytest.raises(DlError, match=message):
        run_resources(RunSpec(root="/d", name="r", world_size=world, resources=given))
