"""Exact mid-epoch resume from counters alone.

The trainer saves `{"epoch", "batches_consumed", "batch_size", ...}` (see `dl.elastic` for the whole state and
for resuming with another world size, worker count or batch size). With a map-style loader the
DataLoader delivers batches in its sampler's order, so the position is `batches_consumed * batch_size`
samples into the epoch's order, whatever the workers. With an IterableDataset,
DataLoader worker `w` builds whole batches from its own stream and the DataLoader hands them out
round-robin over the workers that still have data, so from the batches consumed and each worker's sample
count for the epoch (a pure function of the partition), every worker can re-derive how many samples it had
produced, and replay its order to that point without reading or decoding anything."""

import hashlib
import json

from .dataloader import DlDataLoader
from .elastic import position_from_state
from .errors import ResumeError


def config_hash(config: dict) -> str:
    """A short stable hash of a JSON-able configuration (what must not change across a resume)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def resume_point(batches_consumed: int, batch_size: int, worker_samples: list[int]) -> tuple[list[int], int]:
    """Where each DataLoader worker stood when `batches_consumed` batches had been delivered.

    Args:
        batches_consumed: batches the trainer received this epoch.
        batch_size: samples per batch; a worker's last batch holds its remainder (drop_last=False).
        worker_samples: each worker's total samples this epoch.

    Returns:
        (samples each worker had produced, the worker whose batch the DataLoader would deliver next).
        A resumed DataLoader starts its round-robin at worker 0, so resumed worker `i` must play the role
        of worker `(i + next) % num_workers` for the stream to continue exactly.

    Raises:
        ResumeError: more batches than the epoch holds.
    """
    left = [-(-n // batch_size) for n in worker_samples]  # batches per worker
    taken = [0] * len(worker_samples)
    remaining, last = batches_consumed, len(worker_samples) - 1
    while remaining:
        active = [w for w, b in enumerate(left) if b]
        if not active:
            raise ResumeError(f"{batches_consumed} batches consumed, but this epoch holds only {sum(taken)} "
                              f"(batch_size {batch_size}, worker samples {worker_samples}).")
        rounds = min(min(left[w] for w in active), remaining // len(active))
        served = active if rounds else active[:remaining]
        for w in served:
            taken[w] += rounds or 1
            left[w] -= rounds or 1
            remaining -= rounds or 1
        last = served[-1]
    produced = [min(t * batch_size, n) for t, n in zip(taken, worker_samples, strict=True)]
    return produced, (last + 1) % len(worker_samples)


class ResumableDataLoader(DlDataLoader):
    """A DataLoader over a `dl.loader.Resumable` loader (`map`, `pool`) that counts the batches it delivers,
    so its state is a few counters; each `iter()` reads the loader's next epoch.

    `state_dict()` -> `{"epoch", "batches_consumed", "batch_size", "invariants", "rank", "shape",
    "segments"}` (JSON-able; see `dl.elastic`). The same state serves every rank of the same world, and a
    world of another shape (world size, workers, batch size): `load_state_dict(state)` makes the next
    `iter()` continue exactly where that state was taken, or, in another shape, serve the rest of the
    epoch exactly once. Gather every rank's state with `dl.elastic.merge_states` when ranks may have
    consumed different numbers of batches. Build it with `dl.dataloader.build_dataloader`, which passes what
    the loader's plugins need (a sampler, a start method).

    Raises (load_state_dict):
        ResumeError: the state was saved under other invariants (`Resumable.resume_invariants`: episodes,
            seed, pool size...); the message names each one that differs.
    """

    def __init__(self, dataset, batch_size: int | None = 1, num_workers: int = 0, **kwargs):
        super().__init__(dataset, batch_size=batch_size, num_workers=num_workers, **kwargs)
        self._epoch, self._consumed, self._segments = dataset.epoch, 0, ()

    def _invariants(self) -> dict:
        return json.loads(json.dumps(self.dataset.resume_invariants(self.batch_size, self.num_workers)))

    def _shape(self) -> dict:
        return json.loads(json.dumps(self.dataset.resume_shape(self.batch_size, self.num_workers)))

    def __iter__(self):
        self._epoch = self.dataset.epoch
        position = self.dataset.resume_position()
        self._consumed, self._segments = 0, ()
        if position is not None:
            self._consumed = position.batches if position.batches is not None else 0
            self._segments = position.segments
        advanced = False
        for batch in super().__iter__():
            if not advanced:
                # by now every copy that reads this epoch has started it (forked or spawned workers, a
                # map-style sampler, or this process); move this process's copy on to the next epoch
                self.dataset.set_epoch(self._epoch + 1)
                advanced = True
            self._consumed += 1
            yield batch
        if not advanced:
            self.dataset.set_epoch(self._epoch + 1)
        # the epoch ran out: a state taken now resumes at the start of the next one, not at an empty tail
        self._epoch, self._consumed, self._segments = self._epoch + 1, 0, ()

    def state_dict(self) -> dict:
        """Counters only: the epoch being read, the batches this rank consumed from it in the current shape,
        the invariants, this rank, the shape, and the epoch's earlier segments (other shapes)."""
        return {"epoch": self._epoch, "batches_consumed": self._consumed, "batch_size": self.batch_size,
                "invariants": self._invariants(), "rank": self.dataset.rank, "shape": self._shape(),
                "segments": [s.to_dict() for s in self._segments]}

    def load_state_dict(self, state: dict) -> None:
        """Resume from `state_dict()` output (of this or any rank, of this or another shape) or from
        `dl.elastic.merge_states` of every rank's."""
        state = _upgrade(state, self._shape())
        saved, now = state.get("invariants", {}), self._invariants()
        changed = sorted(k for k in saved.keys() | now.keys() if saved.get(k) != now.get(k))
        if changed:
            diffs = "; ".join(f"{k}: saved {saved.get(k)!r}, now {now.get(k)!r}" for k in changed)
            raise ResumeError(f"the saved loader state does not fit this loader ({diffs}). Resume with the "
                              "saved configuration, or start a fresh epoch without load_state_dict().")
        self.dataset.resume_from(position_from_state(state, self.dataset.rank, self._shape()))
        self._iterator = None  # persistent workers hold an old copy of the dataset: start fresh ones


def _upgrade(state: dict, shape: dict) -> dict:
    """A state saved before elastic resume (no "shape": world size and workers were invariants) in
    today's format."""
    if "shape" in state:
        return state
    invariants = dict(state.get("invariants", {}))
    old = {key: invariants.pop(key) for key in shape if key in invariants}
    old["batch_size"] = state["batch_size"]
    return {**state, "invariants": invariants, "shape": {**shape, **old}, "segments": []}
