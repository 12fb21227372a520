"""Camera frames across the DataLoader's worker boundary, at the lowest cost in copies and page faults.

torch's `default_collate` stacks a batch's frames into NCHW memory, a transposing copy of the decoders' HWC memory,
each batch in freshly faulted pages. So dl's DataLoader (`dl.dataloader.build.build_dataloader`)
stacks frames in the decoders' memory order (`FrameCollate`: channels last, a straight copy), in a worker into
shared-memory buffers the main process hands back for reuse (`dl.dataloader.frame_buffers`), and sends the small tabular
tensors inside the pickled batch instead of a shared-memory segment each (`dl.dataloader.inline_tensors`).

float32 frames: a worker's samples keep uint8 frames and `stack_frames` divides them by 255 while it stacks the batch,
one pass from the decoded frame into the batch's float32 memory (`float32_into`), in the workers, so the main process
(the training loop) does no per-pixel work (`benchmarks/results/internals.md`, "Frames across the worker boundary",
compares it with converting after the worker boundary). For training on a GPU, ask for uint8 and convert there with
`images_to_float`.

Without workers the same holds in the iterating process: the loader gives uint8 frames while the DataLoader fetches
a batch, the collate converts them in the pass that stacks the batch, and batches stack into buffers that no batch
in use holds any more: one conversion pass into reused memory instead of converting each sample and then stacking
it into fresh memory.
"""

from collections.abc import Iterable

import numpy as np
import torch
import torch.utils.data

from .frame_buffers import LocalFrameBuffers, SharedFrameBuffers
from .inline_tensors import collate_inline
from .private_torch import new_shared_storage

KEEP_BATCHES = 4
"""Batches' worth of pooled frame buffers per worker: what the iterating process may hold (the batch in hand and
the one before it) plus the worker's prefetched ones, with room to spare."""


def float32_into(out: np.ndarray, frames: np.ndarray) -> None:
    """`out[...] = frames / 255` in float32, one single-threaded numpy pass: bitwise equal to LeRobot's
    `frames.type(torch.float32) / 255` (multiplying by 1/255 is not: it differs for 126 of the 256 values).

    Args:
        out: float32, the shape of `frames` (any strides).
        frames: uint8 values in [0, 255].
    """
    np.divide(frames, np.float32(255.0), out=out, dtype=np.float32)


def stack_frames(frames: list[torch.Tensor], buffers: SharedFrameBuffers | LocalFrameBuffers | None = None,
                 float32: bool = False) -> torch.Tensor:
    """Stack equal-shaped frame tensors (`[C, H, W]` or `[T, C, H, W]`) into `[B, ...]` in channels-last memory
    (B, (T,) H, W, C order under the NCHW shape), in shared memory inside a DataLoader worker (as
    `default_collate` does, so the batch crosses to the main process without a copy): a buffer of `buffers`
    when given (reused across batches, `dl.dataloader.frame_buffers`), else a fresh segment; outside a worker a
    buffer of `buffers` (a `LocalFrameBuffers`) or fresh memory. With `float32`, uint8 frames become float32 in
    [0, 1] in the same pass (`float32_into` on one thread; torch's division where torch has several threads, as
    in a DataLoader without workers). Tensors on a GPU are stacked with `torch.stack` (and divided there)."""
    first = frames[0]
    convert = float32 and first.dtype == torch.uint8
    if first.device.type != "cpu":
        stacked = torch.stack(frames)
        return stacked.float().div_(255.0) if convert else stacked
    dtype = torch.float32 if convert else first.dtype
    *lead, c, h, w = first.shape
    nbytes = len(frames) * first.numel() * dtype.itemsize
    in_worker = torch.utils.data.get_worker_info() is not None
    if not in_worker:
        storage = buffers.take(nbytes) if isinstance(buffers, LocalFrameBuffers) else torch.UntypedStorage(nbytes)
    else:
        storage = buffers.take(nbytes) if isinstance(buffers, SharedFrameBuffers) else new_shared_storage(nbytes)
    hwc = torch.empty(0, dtype=dtype).set_(storage, 0, (len(frames), *lead, h, w, c))
    threads = torch.get_num_threads() > 1  # torch splits a frame over its threads; numpy is faster on one
    for i, frame in enumerate(frames):
        if convert and threads:
            torch.div(frame.movedim(-3, -1), 255.0, out=hwc[i])  # bitwise equal to float32_into
        elif convert:
            float32_into(hwc[i].numpy(), frame.movedim(-3, -1).numpy())
        else:
            hwc[i].copy_(frame.movedim(-3, -1))
    return hwc.movedim(-1, -3)


class FrameCollate:
    """`default_collate`'s values, except that the camera keys are stacked by `stack_frames` (channels-last
    memory, no transposing copy), that list and None values are kept as a list per batch (`listed_keys`: language
    columns; LeRobot's own collate drops them), and that, in a DataLoader worker, small tensors travel inside the
    pickled batch (`dl.dataloader.inline_tensors.collate_inline`). Batches of anything but sample dicts are collated
    by `collate_inline` as a whole.

    Args:
        video_keys: the camera keys of the samples.
        reuse_buffers: stack into buffers reused across batches, up to KEEP_BATCHES batches' worth
            (`dl.dataloader.frame_buffers`): in a DataLoader worker shared-memory buffers that the iterating process
            hands back (`dl.dataloader.dataloaders.DlDataLoader` does), in the iterating process buffers no tensor
            in use holds.
        float32: give uint8 camera frames as float32 in [0, 1] (x / 255, converted while stacking).
    """

    def __init__(self, video_keys: Iterable[str], reuse_buffers: bool = False, float32: bool = False):
        self.video_keys, self.float32 = tuple(video_keys), float32
        keep = KEEP_BATCHES * len(self.video_keys)
        self.buffers = SharedFrameBuffers(keep) if reuse_buffers else None
        self.local_buffers = LocalFrameBuffers(keep) if reuse_buffers else None

    def __call__(self, samples: list):
        if not samples or not isinstance(samples[0], dict):
            return collate_inline(samples)
        cameras = [k for k in self.video_keys if isinstance(samples[0].get(k), torch.Tensor)]
        kept = {k: [s[k] for s in samples] for k in listed_keys(samples[0])}
        rest = collate_inline([{k: v for k, v in s.items() if k not in cameras and k not in kept} for s in samples])
        buffers = self.buffers if torch.utils.data.get_worker_info() is not None else self.local_buffers
        stacked = {k: stack_frames([s[k] for s in samples], buffers, self.float32) for k in cameras}
        return {k: stacked[k] if k in stacked else kept[k] if k in kept else rest[k] for k in samples[0]}


def listed_keys(sample: dict) -> list[str]:
    """The keys of `sample` a batch keeps as a list of the samples' values: lists (LeRobot 0.6's language columns,
    a list of message dicts per frame, which `default_collate` would transpose across the batch, or fail on) and
    None (a feature info.json lists whose column the data lacks, as LeRobot 0.6.1 serves `subtask_index` after its
    annotation tool dropped it)."""
    return [k for k, v in sample.items() if v is None or isinstance(v, list)]


def images_to_float(batch: dict, video_keys: Iterable[str], device: "str | torch.device | None" = None,
                    non_blocking: bool = True) -> dict:
    """A copy of `batch` with each uint8 camera frame tensor (`video_keys`, e.g. `dataset.meta.camera_keys`)
    moved to `device` and converted there to float32 in [0, 1] (x / 255, as LeRobot's samples hold them).

    For GPU training: load with `image_dtype="uint8"` (4x fewer bytes through the DataLoader and over PCIe)
    and `pin_memory=True`, then call this on each batch; the division runs on the GPU. Other values are moved
    to `device` unchanged (tensors) or kept (strings, lists).

    Args:
        batch: a collated batch (dict of tensors), e.g. from `dl.make_dataloader`.
        video_keys: the camera keys to convert.
        device: where to put the tensors (None: where they are).
        non_blocking: asynchronous host-to-device copies (effective from pinned memory).

    Returns:
        A new dict; camera frames float32 `[B, (T,) C, H, W]`.
    """
    keys = set(video_keys)
    out = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor):
            value = value.to(device, non_blocking=non_blocking) if device is not None else value
            if key in keys and value.dtype == torch.uint8:
                value = value.float().div_(255.0)
        out[key] = value
    return out
