"""Elastic resume: where an epoch stands when the job that read it may come back with another shape.

A loader's *shape* is what may change between a save and a resume (`Resumable.resume_shape`: the world
size, the DataLoader workers of a streaming loader, the batch size). An epoch read under several shapes
is a list of *segments*: each segment is one shape and how many batches each of its ranks had consumed
when it ended. A loader replays the ended segments (which frames each consumer of each shape emitted,
from counters and its seeded orders alone: no reads, no decode), deals the frames not yet emitted to the
consumers of the current shape, and serves them exactly once; the next epoch is whole, in the new shape.
Resuming with the same shape continues the current segment, sample for sample.

State format (what `dl.ResumableDataLoader.state_dict()` returns, JSON-able)::

    {"epoch": 3, "batches_consumed": 17, "batch_size": 8, "invariants": {...},
     "rank": 0, "shape": {"world_size": 2, "num_workers": 4, "batch_size": 8},
     "segments": [{"shape": {...}, "batches_consumed": [40, 38]}]}   # ended segments of this epoch

`batches_consumed` is this rank's count in the current segment; one rank's state assumes every rank of its
world consumed as many (true when ranks step together, as in DDP). `merge_states` turns the states of all
ranks into one state whose `batches_consumed` is a list per rank (`null`: that rank finished its share),
which resumes exactly whatever each rank had consumed.
"""


from ..contracts.errors import ResumeError
from ..contracts.resume import ResumePosition, Segment


def position_from_state(state: dict, rank: int, shape: dict) -> ResumePosition:
    """The position a loader of `shape` at `rank` resumes from `state` (see the module docstring).

    The same shape continues the current segment at this rank's count; another shape ends that segment
    (every rank's count, from the list or the single count) and starts a new one at 0.

    Raises:
        ResumeError: a per-rank list whose length is not the saved world size, or a rank outside it when
            continuing the same shape.
    """
    saved_shape = state["shape"]
    consumed = state["batches_consumed"]
    segments = tuple(Segment.from_dict(s) for s in state.get("segments", []))
    if saved_shape == shape:
        if isinstance(consumed, list):
            if not 0 <= rank < len(consumed):
                raise ResumeError(f"the state lists {len(consumed)} ranks' batches but this is rank {rank}.")
            consumed = consumed[rank]
        return ResumePosition(state["epoch"], consumed, shape["batch_size"], segments)
    per_rank = tuple(consumed) if isinstance(consumed, list) else (consumed,) * saved_shape["world_size"]
    ended = Segment(dict(saved_shape), per_rank)
    if all(b == 0 for b in per_rank):
        ended = None  # nothing was read in that shape: it leaves no segment behind
    return ResumePosition(state["epoch"], 0, shape["batch_size"], segments + ((ended,) if ended else ()))


def merge_states(states: list[dict]) -> dict:
    """One state for a whole world from each rank's `state_dict()` (any order; one per rank), so a resume
    with any shape serves exactly what no rank had consumed, even when ranks consumed different numbers of
    batches (a rank that ran out of its share early is in the next epoch at batch 0: it finished).

    Raises:
        ResumeError: a rank missing or repeated, states of different configurations, shapes or segments,
            or ranks more than one epoch apart.
    """
    if not states:
        raise ResumeError("merge_states needs the state of every rank; got none.")
    world_size = states[0]["shape"]["world_size"]
    ranks = sorted(s.get("rank") for s in states)
    if ranks != list(range(world_size)):
        raise ResumeError(f"merge_states needs one state per rank of world size {world_size}; got ranks {ranks}.")
    for key in ("invariants", "shape", "batch_size"):
        if any(s[key] != states[0][key] for s in states):
            raise ResumeError(f"the ranks' states differ in {key}: {[s[key] for s in states]}.")
    epoch = min(s["epoch"] for s in states)
    behind = [s for s in states if s["epoch"] == epoch]
    if any(s.get("segments", []) != behind[0].get("segments", []) for s in behind):
        raise ResumeError("the ranks' states were resumed from different histories (their segments differ).")
    ahead = [s for s in states if s["epoch"] != epoch]
    if any(s["epoch"] > epoch + 1 or s["batches_consumed"] for s in ahead):
        raise ResumeError(f"the ranks are more than one epoch apart: (rank, epoch, batches) = "
                          f"{[(s['rank'], s['epoch'], s['batches_consumed']) for s in states]}.")
    consumed = [None] * world_size
    for s in behind:
        consumed[s["rank"]] = s["batches_consumed"]
    return {**{k: v for k, v in behind[0].items() if k != "rank"}, "batches_consumed": consumed}
