"""The one place a torch DataLoader is built for a dl loader, from what its plugins need of it.

A loader, its decoder and its source each state their needs (`dataloader_needs()`): a start method for
workers (`spawn` for a decoder that holds a CUDA context), `pin_memory`, a worker init function, a
collate function, a sampler. `build_dataloader` merges them, refuses contradictions, moves camera frames
across the worker boundary cheaply (`dl.frames`), and picks `dl.ResumableDataLoader` for a loader that can
resume.
"""

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch.utils.data

from .errors import PluginError

if TYPE_CHECKING:
    from .loader import Loader


@dataclass(frozen=True)
class DataLoaderNeeds:
    """What a plugin needs of the DataLoader; None means "no requirement".

    Attributes:
        multiprocessing_context: the workers' start method ("spawn", "forkserver" or "fork").
        pin_memory: whether batches must (True) or must not (False) be pinned.
        worker_init_fn: called in each worker with its id, as torch's `worker_init_fn`.
        collate_fn: builds a batch from a list of samples.
        sampler: the order of a map-style loader (torch Sampler); a loader that shards and shuffles
            itself gives one, else the DataLoader shuffles with a seeded generator.
    """

    multiprocessing_context: str | None = None
    pin_memory: bool | None = None
    worker_init_fn: Callable | None = None
    collate_fn: Callable | None = None
    sampler: Any = None

    def recorded(self) -> dict:
        """The needs as JSON-able facts for a result file (callables by qualified name)."""
        out = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                out[field.name] = value if isinstance(value, str | bool) else _qualname(value)
        return out


def _qualname(obj) -> str:
    named = obj if getattr(obj, "__qualname__", None) else type(obj)
    return f"{named.__module__}.{named.__qualname__}"


def merge_needs(needs: dict[str, DataLoaderNeeds]) -> DataLoaderNeeds:
    """Combine the needs of several plugins (`{"loader pool": needs, ...}`, the key names the plugin).

    Raises:
        PluginError: two plugins need different values of one field; the message names both.
    """
    merged: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for who, need in needs.items():
        for field in dataclasses.fields(need):
            value = getattr(need, field.name)
            if value is None:
                continue
            if field.name in merged and merged[field.name] is not value and merged[field.name] != value:
                raise PluginError(f"{owner[field.name]} needs DataLoader {field.name}={merged[field.name]!r} but "
                                  f"{who} needs {value!r}; these plugins cannot be used together.")
            merged[field.name], owner[field.name] = value, who
    return DataLoaderNeeds(**merged)


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
    """The `worker_init_fn` dl gives every DataLoader: `quiet_fd_sharing()`, with `emit_uint8` the worker's copy
    of the loader told to give uint8 camera frames (`dl.loader.DefersFloat`: the worker's collate converts them
    while it stacks the batch), then the plugins' own `worker_init_fn` (picklable, so spawned workers get it
    too)."""

    def __init__(self, then: Callable | None = None, emit_uint8: bool = False):
        self.then, self.emit_uint8 = then, emit_uint8

    def __call__(self, worker_id: int) -> None:
        quiet_fd_sharing()
        if self.emit_uint8:
            torch.utils.data.get_worker_info().dataset.emit_uint8_frames()
        if self.then is not None:
            self.then(worker_id)


class DlDataLoader(torch.utils.data.DataLoader):
    """A torch DataLoader that applies `batch_transforms`, in order, to every batch in the iterating process
    (dl's hand-back of the workers' frame buffers, `dl.frame_buffers.FrameBufferReturns`), and says how it was
    built (`facts`)."""

    def __init__(self, dataset, *args, batch_transforms: Sequence[Callable] = (), facts: dict | None = None,
                 **kwargs):
        super().__init__(dataset, *args, **kwargs)
        self.batch_transforms, self._facts = tuple(batch_transforms), dict(facts or {})

    def __iter__(self):
        batches = super().__iter__()
        for transform in self.batch_transforms:
            batches = map(transform, batches)
        return batches

    def facts(self) -> dict:
        """JSON-able facts for a result file: the plugins' needs, the collate function and where camera frames
        become float32."""
        return dict(self._facts)


def loader_needs(loader: "Loader") -> DataLoaderNeeds:
    """The merged needs of a loader, its decoder and its source."""
    return merge_needs({f"loader {type(loader).__name__}": loader.dataloader_needs(),
                        f"decoder {loader.decoder.name}": loader.decoder.dataloader_needs(),
                        f"source {loader.meta.source.name}": loader.meta.source.dataloader_needs()})


def build_dataloader(loader: "Loader", *, batch_size: int | None, num_workers: int = 0, seed: int = 0,
                     prefetch_factor: int | None = None, persistent_workers: bool = False,
                     reuse_frame_buffers: bool = True, **overrides) -> DlDataLoader:
    """A DataLoader over a dl loader that honours what its plugins need.

    Collation: unless a plugin or the caller gives a `collate_fn`, batches are collated by
    `dl.frames.FrameCollate`: `default_collate`'s values, small tensors sent from a worker inside the pickled
    batch (`dl.inline_tensors`), camera frames stacked in channels-last memory (the decoders' order), with
    workers and no `pin_memory` into shared-memory buffers this process hands back to the workers for reuse
    (`dl.frame_buffers`: no fresh pages per batch); and when the loader asks for float32 frames, has workers
    and can defer the conversion (`dl.loader.DefersFloat`), its samples in the workers keep uint8 frames and
    the workers' collate divides them by 255 while it stacks the batch (`dl.frames.stack_frames`): the same
    values, one pass instead of two, none of it in this process.

    Args:
        loader: a dl loader (`dl.loader.Loader`).
        batch_size: samples per batch; None yields unbatched samples.
        num_workers: DataLoader worker processes (0: read in this process).
        seed: seeds the DataLoader's generator (worker seeds, and the shuffle of a map-style loader
            without a sampler of its own).
        prefetch_factor, persistent_workers: as torch's (only with workers).
        reuse_frame_buffers: let workers reuse the shared memory of camera frames this process no longer
            references (`dl.frame_buffers`). Pass False if you send batches on to another process (a torch
            multiprocessing queue): that process's reads are not references here.
        **overrides: other DataLoader arguments; one that contradicts a plugin's need raises.

    Returns:
        A `dl.ResumableDataLoader` when the loader is `dl.loader.Resumable`, else a `DlDataLoader` (a torch
        DataLoader).

    Raises:
        PluginError: the plugins' needs contradict each other or `overrides`.
        ValueError: num_workers < 0.
    """
    from .frame_buffers import FrameBufferReturns
    from .frames import FrameCollate
    from .loader import DefersFloat, Resumable
    from .resume import ResumableDataLoader

    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0, got {num_workers}")
    needs = loader_needs(loader)
    given = {f.name: overrides.pop(f.name) for f in dataclasses.fields(DataLoaderNeeds) if f.name in overrides}
    needs = merge_needs({"the caller": DataLoaderNeeds(**given), "the plugins": needs})
    kwargs: dict[str, Any] = {"batch_size": batch_size, "num_workers": num_workers,
                              "generator": torch.Generator().manual_seed(seed), **overrides}
    if num_workers:
        kwargs.update(persistent_workers=persistent_workers, prefetch_factor=prefetch_factor or 2,
                      multiprocessing_context=needs.multiprocessing_context)
    for name in ("pin_memory", "collate_fn", "sampler"):
        if getattr(needs, name) is not None:
            kwargs[name] = getattr(needs, name)
    cameras = list(loader.meta.video_keys)
    facts = needs.recorded()
    ours = needs.collate_fn is None and batch_size is not None
    reuse = reuse_frame_buffers and ours and bool(cameras) and num_workers > 0 and not kwargs.get("pin_memory")
    defer = (ours and num_workers > 0 and bool(cameras) and loader.config.image_dtype == "float32"
             and isinstance(loader, DefersFloat))
    kwargs["worker_init_fn"] = WorkerInit(needs.worker_init_fn, emit_uint8=defer)
    if ours:
        kwargs["collate_fn"] = FrameCollate(cameras, reuse_buffers=reuse, float32=defer)
        facts["collate_fn"] = _qualname(kwargs["collate_fn"])
    if defer:
        facts["image_float32"] = "in the workers' collate (samples keep uint8 frames until the batch is stacked)"
    kwargs["batch_transforms"] = [FrameBufferReturns(cameras)] if reuse else []
    if reuse:
        facts["frame_buffers"] = "reused (workers stack frames into shared memory this process hands back)"
    if needs.sampler is None and not isinstance(loader, torch.utils.data.IterableDataset):
        kwargs["shuffle"] = True
    cls = ResumableDataLoader if isinstance(loader, Resumable) else DlDataLoader
    return cls(loader, facts=facts, **kwargs)
