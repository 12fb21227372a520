"""The DataLoader classes dl builds (`dl.dataloader.build.build_dataloader` picks one): `DlDataLoader`, a torch
DataLoader that applies dl's batch transforms and says how it was built, and `ResumableDataLoader`, which also
counts the batches it delivers so its state is a few counters (`dl.dataloader.resume`, `dl.dataloader.elastic`)."""

import json
from collections.abc import Callable, Sequence

import torch.utils.data

from ..contracts.errors import ResumeError
from ..contracts.loader import FitsWorkers
from .elastic import position_from_state
from .private_torch import drop_iterator


class DlDataLoader(torch.utils.data.DataLoader):
    """A torch DataLoader that applies `batch_transforms`, in order, to every batch in the iterating process
    (dl's hand-back of the workers' frame buffers, `dl.dataloader.frame_buffers.FrameBufferReturns`), and says
    how it was built (`facts`).

    Args:
        uint8_while_fetching: without workers, switch the loader (a `dl.contracts.loader.DefersFloat`) to uint8
            camera frames while each batch is fetched and collated, and back after, so the collate converts them
            to float32 in the pass that stacks the batch, while the loader read directly still gives float32.
    """

    def __init__(self, dataset, *args, batch_transforms: Sequence[Callable] = (), facts: dict | None = None,
                 uint8_while_fetching: bool = False, **kwargs):
        super().__init__(dataset, *args, **kwargs)
        self.batch_transforms, self._facts = tuple(batch_transforms), dict(facts or {})
        self.uint8_while_fetching = uint8_while_fetching and self.num_workers == 0

    def __iter__(self):
        batches = super().__iter__()
        if self.uint8_while_fetching:
            batches = _fetched_as_uint8(batches, self.dataset)
        for transform in self.batch_transforms:
            batches = map(transform, batches)
        return batches

    def facts(self) -> dict:
        """JSON-able facts for a result file: the plugins' needs, the collate function and where camera frames
        become float32."""
        return dict(self._facts)


class ResumableDataLoader(DlDataLoader):
    """A DataLoader over a `dl.contracts.loader.Resumable` loader (`map`, `pool`) that counts the batches it delivers,
    so its state is a few counters; each `iter()` reads the loader's next epoch.

    `state_dict()` -> `{"epoch", "batches_consumed", "batch_size", "invariants", "rank", "shape",
    "segments"}` (JSON-able; see `dl.dataloader.elastic`). The same state serves every rank of the same world, and a
    world of another shape (world size, workers, batch size): `load_state_dict(state)` makes the next
    `iter()` continue exactly where that state was taken, or, in another shape, serve the rest of the
    epoch exactly once. Gather every rank's state with `dl.dataloader.elastic.merge_states` when ranks may have
    consumed different numbers of batches. Build it with `dl.dataloader.build.build_dataloader`, which passes what
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
        `dl.dataloader.elastic.merge_states` of every rank's."""
        state = _upgrade(state, self._shape())
        saved = state.get("invariants", {})
        if isinstance(self.dataset, FitsWorkers):  # what a fit to the saved shape chose, e.g. the chunk length
            self.dataset.keep_invariants(saved)
        now = self._invariants()
        changed = sorted(k for k in saved.keys() | now.keys() if saved.get(k) != now.get(k))
        if changed:
            diffs = "; ".join(f"{k}: saved {saved.get(k)!r}, now {now.get(k)!r}" for k in changed)
            raise ResumeError(f"the saved loader state does not fit this loader ({diffs}). Resume with the "
                              "saved configuration, or start a fresh epoch without load_state_dict().")
        self.dataset.resume_from(position_from_state(state, self.dataset.rank, self._shape()))
        if not drop_iterator(self) and self.persistent_workers:  # their copy of the dataset is at the old position
            raise ResumeError(f"load_state_dict cannot restart this DataLoader's persistent workers (torch "
                              f"{torch.__version__}'s DataLoader has no _iterator to drop): build the DataLoader "
                              "with persistent_workers=False to resume.")


def _fetched_as_uint8(batches, loader):
    """`batches` (fetched and collated in this process), each fetched with `loader` giving uint8 frames."""
    while True:
        loader.emit_uint8_frames(True)
        try:
            batch = next(batches)
        except StopIteration:
            return
        finally:
            loader.emit_uint8_frames(False)
        yield batch


def _upgrade(state: dict, shape: dict) -> dict:
    """A state saved before elastic resume (no "shape": world size and workers were invariants) in
    today's format."""
    if "shape" in state:
        return state
    invariants = dict(state.get("invariants", {}))
    old = {key: invariants.pop(key) for key in shape if key in invariants}
    old["batch_size"] = state["batch_size"]
    return {**state, "invariants": invariants, "shape": {**shape, **old}, "segments": []}
