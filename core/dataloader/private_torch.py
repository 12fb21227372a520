"""The private torch APIs dl relies on, each with what dl does when a torch release lacks it. A fallback that
changes behaviour or speed is announced once per process (a `RuntimeWarning` naming the API and the torch
version); none is silent.

- `torch._C._storage_Use_Count`: whether the main process still references a batch's frame buffer
  (`dl.dataloader.frame_buffers`). Without it buffers are never reused: each batch's frames go to fresh shared
  memory, as torch's own collate does (slower to fill: `benchmarks/results/internals.md`).
- `torch.UntypedStorage._new_shared`: a storage allocated straight in shared memory. Without it a storage is
  allocated, then moved to shared memory (`share_memory_()`, one more copy).
- `DataLoader._iterator`: the iterator that owns persistent workers, dropped after `load_state_dict` so the
  workers restart with the resumed dataset. Without it, a resume with `persistent_workers=True` is refused
  (the old workers would serve the old position).
"""

import warnings

import torch

_announced: set[str] = set()


def announce_missing(api: str, consequence: str) -> None:
    """Warn once per process that torch lacks `api`, and what dl does instead (`consequence`)."""
    if api in _announced:
        return
    _announced.add(api)
    warnings.warn(f"torch {torch.__version__} has no {api}: {consequence}", RuntimeWarning, stacklevel=3)


def _use_count_api():
    return getattr(torch._C, "_storage_Use_Count", None)


def counts_references() -> bool:
    """Whether this torch counts a storage's references (`storage_use_count` works)."""
    return _use_count_api() is not None


def storage_use_count(storage: torch.UntypedStorage) -> int | None:
    """How many references this process holds to `storage`; None when torch cannot say."""
    use_count = _use_count_api()
    return None if use_count is None else use_count(storage._cdata)


def new_shared_storage(nbytes: int) -> torch.UntypedStorage:
    """An `nbytes` storage in shared memory (what a DataLoader worker's batch is made of)."""
    new_shared = getattr(torch.UntypedStorage, "_new_shared", None)
    if new_shared is not None:
        return new_shared(nbytes)
    announce_missing("torch.UntypedStorage._new_shared",
                     "batches are allocated, then moved to shared memory (share_memory_(), one more copy).")
    return torch.UntypedStorage(nbytes).share_memory_()


def drop_iterator(dataloader: torch.utils.data.DataLoader) -> bool:
    """Drop the DataLoader's iterator, so the next `iter()` starts fresh (persistent) workers; False when this
    torch keeps it elsewhere (nothing was dropped)."""
    if "_iterator" not in vars(dataloader):
        return False
    dataloader._iterator = None
    return True
