"""The one place a torch DataLoader is built for a dl loader, from what its plugins need of it.

A loader, its decoder and its source each state their needs (`dataloader_needs()`): a start method for
workers (`spawn` for a decoder that holds a CUDA context), `pin_memory`, a worker init function, a
collate function, a sampler. `build_dataloader` merges them, refuses contradictions, moves camera frames
across the worker boundary cheaply (`dl.dataloader.frames`), and picks `dl.ResumableDataLoader` for a loader that can
resume.
"""

import dataclasses
import gc
from collections.abc import Callable
from typing import Any

import torch.utils.data

from ..contracts.errors import DlError
from ..contracts.loader import Composite, DefersFloat, FitsWorkers, Loader, Resumable
from ..contracts.needs import DataLoaderNeeds, merge_needs, qualified_name
from .dataloaders import DlDataLoader, ResumableDataLoader
from .frame_buffers import FrameBufferReturns
from .frames import FrameCollate
from .private_torch import announce_missing, counts_references
from .world import check_worker_count

QUIET_ERRORS = (BrokenPipeError, ConnectionResetError, EOFError)


def quiet_fd_sharing() -> None:
    """In this process, stop multiprocessing's file-descriptor sharing thread (`resource_sharer._serve`, which
    hands shared-memory tensors between DataLoader workers and the main process) from printing a traceback
    when the other side went away mid-handshake: after Ctrl-C or SIGTERM that is expected, and the real error,
    if any, is reported by the process that stopped. (That thread reports through `sys.excepthook`.)"""
    import sys
    import threading

    previous = sys.excepthook
    if getattr(previous, "dl_quiet", False):
        return

    def hook(exc_type, exc, tb):
        if issubclass(exc_type, QUIET_ERRORS) and threading.current_thread().name.endswith("(_serve)"):
            return
        previous(exc_type, exc, tb)

    hook.dl_quiet = True
    sys.excepthook = hook


class WorkerInit:
    """The `worker_init_fn` dl gives every DataLoader: `gc.freeze()`, `quiet_fd_sharing()`, with `emit_uint8` the
    worker's copy of the loader told to give uint8 camera frames (`dl.contracts.loader.DefersFloat`: the worker's
    collate converts them while it stacks the batch), then the plugins' own `worker_init_fn` (picklable, so
    spawned workers get it too).

    `gc.freeze()` moves every object the worker has so far (in a forked worker, the parent's heap) to the
    collector's permanent generation. Without it a forked worker's first full collection walks all of them
    (0.24 s for 36,000 objects on open50, between a `pool` worker's first admissions) and touches their pages,
    which copies them; with it the worker's collections walk only what the worker makes. The parent's garbage
    inherited at the fork is then never finalized in a worker, only once, in the parent. (The freeze is done in
    the worker, not around the fork in the parent: unfreezing there would move the parent's young garbage to
    the oldest generation, where cycles holding worker pipes wait for a rare full collection.)"""

    def __init__(self, then: Callable | None = None, emit_uint8: bool = False):
        self.then, self.emit_uint8 = then, emit_uint8

    def __call__(self, worker_id: int) -> None:
        gc.freeze()
        quiet_fd_sharing()
        if self.emit_uint8:
            torch.utils.data.get_worker_info().dataset.emit_uint8_frames()
        if self.then is not None:
            self.then(worker_id)


def loader_needs(loader: Loader) -> DataLoaderNeeds:
    """The merged needs of a loader, its decoder and its source (a `Composite` loader merges its members')."""
    if isinstance(loader, Composite):
        return loader.dataloader_needs()
    return merge_needs({f"loader {type(loader).__name__}": loader.dataloader_needs(),
                        f"decoder {loader.decoder.name}": loader.decoder.dataloader_needs(),
                        f"source {loader.meta.source.name}": loader.meta.source.dataloader_needs()})


def camera_keys(loader: Loader) -> list[str]:
    """The camera keys of a loader's samples (video and image features): its dataset's `meta.camera_keys`, or a
    `Composite`'s `video_keys`."""
    return list(loader.video_keys if isinstance(loader, Composite) else loader.meta.camera_keys)


def build_dataloader(loader: Loader, *, batch_size: int | None, num_workers: int = 0, seed: int = 0,
                     prefetch_factor: int | None = None, persistent_workers: bool = False,
                     reuse_frame_buffers: bool = True, **overrides) -> DlDataLoader:
    """A DataLoader over a dl loader that honours what its plugins need.

    Collation: unless a plugin or the caller gives a `collate_fn`, batches are collated by
    `dl.dataloader.frames.FrameCollate`: `default_collate`'s values, small tensors sent from a worker inside the
    pickled batch (`dl.dataloader.inline_tensors`), camera frames stacked in channels-last memory (the decoders'
    order): with workers and no `pin_memory` into shared-memory buffers this process hands back to the workers for
    reuse, without workers into buffers no batch in use holds (`dl.dataloader.frame_buffers`: no fresh pages per
    batch). When the loader asks for float32 frames and can defer the conversion (`dl.contracts.loader.DefersFloat`),
    its samples keep uint8 frames and the collate divides them by 255 while it stacks the batch
    (`dl.dataloader.frames.stack_frames`): the same values, one pass instead of two; with workers none of it in this
    process, without workers only while the DataLoader fetches a batch (the loader read directly gives float32).

    Args:
        loader: a dl loader (`dl.contracts.loader.Loader`).
        batch_size: samples per batch; None yields unbatched samples.
        num_workers: DataLoader worker processes (0: read in this process).
        seed: seeds the DataLoader's generator (worker seeds, and the shuffle of a map-style loader
            without a sampler of its own).
        prefetch_factor, persistent_workers: as torch's (only with workers).
        reuse_frame_buffers: stack camera frames into memory reused once this process no longer references
            it: workers' shared memory handed back, or without workers this process's own buffers
            (`dl.dataloader.frame_buffers`). Pass False if you send batches on to another process (a torch
            multiprocessing queue): that process's reads are not references here.
        **overrides: other DataLoader arguments; one that contradicts a plugin's need raises.

    A loader that sizes its order for its workers (`dl.contracts.loader.FitsWorkers`: the `pool` loader's "auto"
    chunk length) is fitted to `num_workers` first: the last DataLoader built over a loader sets its order.

    Returns:
        A `dl.ResumableDataLoader` when the loader is `dl.contracts.loader.Resumable`, else a `DlDataLoader` (a torch
        DataLoader).

    Raises:
        PluginError: the plugins' needs contradict each other or `overrides`.
        ValueError: num_workers < 0.
        DlError: more workers than this machine can run (`dl.dataloader.world.check_worker_count`), or
            `in_order=False` for a resumable loader (its state counts batches in order).
    """
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0, got {num_workers}")
    check_worker_count(num_workers)
    if overrides.get("in_order") is False and isinstance(loader, Resumable):
        raise DlError("in_order=False lets the DataLoader hand out batches as workers finish them, but a resumable "
                      "loader's state counts batches in order (dl.dataloader.resume): a resume would repeat or skip "
                      "samples. Leave in_order at True.")
    if isinstance(loader, FitsWorkers):
        loader.fit_workers(num_workers)
    needs = loader_needs(loader)
    given = {f.name: overrides.pop(f.name) for f in dataclasses.fields(DataLoaderNeeds) if f.name in overrides}
    needs = merge_needs({"the caller": DataLoaderNeeds(**given), "the plugins": needs})
    kwargs: dict[str, Any] = {"batch_size": batch_size, "num_workers": num_workers,
                              "generator": torch.Generator().manual_seed(seed), **overrides}
    if num_workers:
        kwargs.update(persistent_workers=persistent_workers, prefetch_factor=prefetch_factor or 2,
                      multiprocessing_context=needs.multiprocessing_context)
    for name in ("pin_memory", "collate_fn", "sampler"):
        if getattr(needs, name) is not None and not (name == "collate_fn" and batch_size is None):
            kwargs[name] = getattr(needs, name)  # a plugin's collate makes batches: unbatched reads convert only
    cameras = camera_keys(loader)
    facts = needs.recorded()
    ours = needs.collate_fn is None and batch_size is not None
    reuse = reuse_frame_buffers and ours and bool(cameras) and not (num_workers and kwargs.get("pin_memory"))
    if reuse and not counts_references():
        announce_missing("torch._C._storage_Use_Count", "dl cannot tell when this process is done with a batch's "
                         "frames, so each batch's frames go to fresh memory (slower).")
        reuse = False
    defer = (ours and bool(cameras) and loader.config.image_dtype == "float32" and isinstance(loader, DefersFloat))
    kwargs["worker_init_fn"] = WorkerInit(needs.worker_init_fn, emit_uint8=defer and num_workers > 0)
    if ours:
        kwargs["collate_fn"] = FrameCollate(cameras, reuse_buffers=reuse, float32=defer)
        facts["collate_fn"] = qualified_name(kwargs["collate_fn"])
    if defer:
        where = "the workers' collate" if num_workers else "the collate, in this process"
        facts["image_float32"] = f"in {where} (samples keep uint8 frames until the batch is stacked)"
    kwargs["batch_transforms"] = [FrameBufferReturns(cameras)] if reuse and num_workers else []
    if reuse:
        facts["frame_buffers"] = ("reused (workers stack frames into shared memory this process hands back)"
                                  if num_workers else "reused (batches stack into memory no batch in use holds)")
    if needs.sampler is None and not isinstance(loader, torch.utils.data.IterableDataset):
        kwargs["shuffle"] = True
    cls = ResumableDataLoader if isinstance(loader, Resumable) else DlDataLoader
    return cls(loader, facts=facts, uint8_while_fetching=defer and not num_workers, **kwargs)
