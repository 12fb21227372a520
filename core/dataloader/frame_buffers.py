"""Shared-memory buffers for the camera frames of DataLoader batches, reused across batches, so a worker copies a
batch's frames into pages that are already mapped instead of into a fresh shared-memory segment each time.

A fresh segment costs a page fault and the kernel's zero-fill on every page's first touch, which a reused one does
not pay (`benchmarks/results/internals.md`, "Frames across the worker boundary").

How a buffer comes back: each pooled buffer ends with a 16-byte trailer after the frames, in the shared pages
both processes map: a tag and a state byte. The worker (`SharedFrameBuffers.take`) reuses a buffer only when
its state is FREE, and marks it LENT before filling it. The iterating process (`FrameBufferReturns`, run on
every batch by `dl.dataloader.dataloaders.DlDataLoader`) keeps the storages of the batches it handed out and marks one
FREE, then forgets it, once nothing else in that process references it (torch's storage use count, the check
torch's CUDA-graph trees make before reusing an output buffer). A batch that never reaches a
`FrameBufferReturns` (a plain torch DataLoader, `pin_memory`) leaves its buffers LENT and the worker
allocates fresh segments, as torch's own collate does. References held by a third process that a batch was
sent on to are not counted: `build_dataloader(reuse_frame_buffers=False)` is for that case.
"""

import numpy as np
import torch

from .private_torch import counts_references, new_shared_storage, storage_use_count

TRAILER = 16
"""Bytes after the frames of a pooled buffer: `_TAG` then the state byte."""
_TAG = b"dl.frame_buffer"
FREE, LENT = 0, 1



def sole_reference(storage: torch.UntypedStorage) -> bool:
    """Whether the caller's reference to `storage` is its only one in this process (False where torch does not
    count references, `dl.dataloader.private_torch`): its memory can be written again without changing any
    tensor still in use."""
    return storage_use_count(storage) == 1


def _trailer(storage: torch.UntypedStorage) -> np.ndarray:
    """The last TRAILER bytes of `storage` as a writable uint8 array (a view of the shared pages)."""
    view = torch.empty(0, dtype=torch.uint8).set_(storage, storage.nbytes() - TRAILER, (TRAILER,))
    return view.numpy()


class SharedFrameBuffers:
    """A DataLoader worker's pooled shared-memory buffers, by size in bytes.

    Args:
        keep: the most pooled buffers of one size (beyond it, `take` gives unpooled segments).
    """

    def __init__(self, keep: int):
        self.keep = keep
        self._pool: dict[int, list[torch.UntypedStorage]] = {}

    def __getstate__(self):  # a spawned or forked worker starts with an empty pool of its own
        return {"keep": self.keep, "_pool": {}}

    def take(self, nbytes: int) -> torch.UntypedStorage:
        """A shared storage whose first `nbytes` bytes the caller fills: a FREE pooled buffer (now LENT), a new
        pooled one while fewer than `keep` of this size exist, else a fresh unpooled segment of `nbytes`."""
        if not counts_references():
            return new_shared_storage(nbytes)
        buffers = self._pool.setdefault(nbytes, [])
        for storage in buffers:
            trailer = _trailer(storage)
            if trailer[-1] == FREE:
                trailer[-1] = LENT
                return storage
        if len(buffers) >= self.keep:
            return new_shared_storage(nbytes)
        storage = new_shared_storage(nbytes + TRAILER)
        trailer = _trailer(storage)
        trailer[:-1] = np.frombuffer(_TAG, dtype=np.uint8)
        trailer[-1] = LENT
        buffers.append(storage)
        return storage


class LocalFrameBuffers:
    """Buffers for the batches a DataLoader without workers stacks in this process, reused once nothing but this
    pool references them (torch's storage use count): a float32 640x480 batch of 16 is 59 MB, which the allocator
    maps fresh each time (the kernel zero-fills every page on first touch) unless it is kept.

    Args:
        keep: the most pooled buffers of one size (beyond it, and where torch does not count references, `take`
            gives fresh storages).
    """

    def __init__(self, keep: int):
        self.keep = keep
        self._pool: dict[int, list[torch.UntypedStorage]] = {}

    def __getstate__(self):  # a worker's copy never stacks in the iterating process: it starts empty
        return {"keep": self.keep, "_pool": {}}

    def take(self, nbytes: int) -> torch.UntypedStorage:
        """A storage of `nbytes` bytes that no tensor of this process uses."""
        if not counts_references():
            return torch.UntypedStorage(nbytes)
        buffers = self._pool.setdefault(nbytes, [])
        for storage in buffers:
            if sole_reference(storage):
                return storage
        storage = torch.UntypedStorage(nbytes)
        if len(buffers) < self.keep:
            buffers.append(storage)
        return storage


class FrameBufferReturns:
    """In the iterating process: hands the pooled buffers of earlier batches back to their workers once nothing
    references them (see the module docstring); batches pass through unchanged.

    Args:
        video_keys: the camera keys of the batches.
    """

    def __init__(self, video_keys):
        self.video_keys = tuple(video_keys)
        self._lent: list[torch.UntypedStorage] = []

    def __getstate__(self):
        return {"video_keys": self.video_keys, "_lent": []}

    def __call__(self, batch):
        self.give_back()
        if isinstance(batch, dict):
            seen = {s.data_ptr() for s in self._lent}
            for key in self.video_keys:
                value = batch.get(key)
                if isinstance(value, torch.Tensor) and in_pooled_buffer(value) and value.data_ptr() not in seen:
                    self._lent.append(value.untyped_storage())
                    seen.add(value.data_ptr())
        return batch

    def give_back(self) -> None:
        """Mark FREE every held buffer that only this object references, and forget it."""
        held = []
        for storage in self._lent:
            if sole_reference(storage):
                _trailer(storage)[-1] = FREE
            else:
                held.append(storage)
        self._lent = held


def in_pooled_buffer(frames: torch.Tensor) -> bool:
    """Whether `frames` fill a pooled buffer: on the CPU, from the start of a storage TRAILER bytes longer than
    them whose trailer carries the tag (the frames' own bytes never count as a trailer)."""
    if not counts_references() or frames.device.type != "cpu" or frames.storage_offset() != 0:
        return False
    storage = frames.untyped_storage()
    if storage.nbytes() != frames.numel() * frames.element_size() + TRAILER:
        return False
    return _trailer(storage)[:-1].tobytes() == _TAG
