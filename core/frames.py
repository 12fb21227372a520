"""Camera frames across the DataLoader's worker boundary, at the lowest cost in copies and page faults.

Measured on open50 (640x480, map loader, 2 workers, 2 cores): torch's `default_collate` stacks a batch's frames
into NCHW memory, a transposing copy of the decoders' HWC memory that costs 0.8 ms per frame in shared memory
(4x that for float32), and a float32 sample carries 4x the bytes of a uint8 one through shared memory, each
batch in freshly faulted pages. So dl's DataLoader (`dl.dataloader.build_dataloader`):

- stacks frames in the decoders' memory order (`FrameCollate`: channels last, a straight copy), in a worker
  into shared-memory buffers the main process hands back for reuse (`dl.frame_buffers`), and sends the small
  tabular tensors inside the pickled batch instead of a shared-memory segment each (`dl.inline_tensors`);
- with `image_dtype="float32"` and workers, lets the workers send uint8 and converts in the main process
  (`FloatFrames`): one pass into output buffers that are reused once nothing holds them.

For training on a GPU, ask for uint8 and convert there with `images_to_float`.
"""

from collections.abc import Iterable

import numpy as np
import torch
import torch.utils.data

from .frame_buffers import COUNTS_REFERENCES, SharedFrameBuffers, sole_reference
from .inline_tensors import collate_inline

KEEP_BATCHES = 4
"""Batches' worth of pooled frame buffers per worker: what the iterating process may hold (the batch in hand and
the one before it) plus the worker's prefetched ones, with room to spare."""


def stack_frames(frames: list[torch.Tensor], buffers: SharedFrameBuffers | None = None) -> torch.Tensor:
    """Stack equal-shaped frame tensors (`[C, H, W]` or `[T, C, H, W]`) into `[B, ...]` in channels-last memory
    (B, (T,) H, W, C order under the NCHW shape), in shared memory inside a DataLoader worker (as
    `default_collate` does, so the batch crosses to the main process without a copy): a buffer of `buffers`
    when given (reused across batches, `dl.frame_buffers`), else a fresh segment. Tensors on a GPU are stacked
    with `torch.stack`."""
    first = frames[0]
    if first.device.type != "cpu":
        return torch.stack(frames)
    *lead, c, h, w = first.shape
    nbytes = len(frames) * first.numel() * first.element_size()
    in_worker = torch.utils.data.get_worker_info() is not None
    if not in_worker:
        storage = torch.UntypedStorage(nbytes)
    else:
        storage = buffers.take(nbytes) if buffers is not None else torch.UntypedStorage._new_shared(nbytes)
    hwc = torch.empty(0, dtype=first.dtype).set_(storage, 0, (len(frames), *lead, h, w, c))
    out = hwc.movedim(-1, -3)
    for i, frame in enumerate(frames):
        out[i].copy_(frame)
    return out


class FrameCollate:
    """`default_collate`'s values, except that the camera keys are stacked by `stack_frames` (channels-last
    memory, no transposing copy: 2.5x less collate time per uint8 frame, measured) and that, in a DataLoader
    worker, small tensors travel inside the pickled batch (`dl.inline_tensors.collate_inline`). Batches of
    anything but sample dicts are collated by `collate_inline` as a whole.

    Args:
        video_keys: the camera keys of the samples.
        reuse_buffers: in a DataLoader worker, stack into shared-memory buffers that the iterating process hands
            back (`dl.frame_buffers`; `dl.dataloader.DlDataLoader` does), up to KEEP_BATCHES batches' worth.
    """

    def __init__(self, video_keys: Iterable[str], reuse_buffers: bool = False):
        self.video_keys = tuple(video_keys)
        self.buffers = SharedFrameBuffers(KEEP_BATCHES * len(self.video_keys)) if reuse_buffers else None

    def __call__(self, samples: list):
        if not samples or not isinstance(samples[0], dict):
            return collate_inline(samples)
        cameras = [k for k in self.video_keys if isinstance(samples[0].get(k), torch.Tensor)]
        rest = collate_inline([{k: v for k, v in s.items() if k not in cameras} for s in samples])
        stacked = {k: stack_frames([s[k] for s in samples], self.buffers) for k in cameras}
        return {k: stacked[k] if k in stacked else rest[k] for k in samples[0]}


class FloatFrames:
    """Converts the uint8 camera frames of a batch (or of one sample) to float32 in [0, 1]: x / 255, bitwise
    equal to LeRobot's `frames / 255.0`. On the CPU the division runs in one single-threaded numpy pass
    (no OpenMP threads spinning in the training process) into an output buffer in the input's memory order,
    taken from up to `keep` buffers this converter made before and that nothing references any more (a
    fresh 59 MB buffer per batch of 16 640x480 frames costs more in page faults than the conversion itself);
    tensors on a GPU are converted there.

    Args:
        video_keys: the camera keys.
        keep: buffers kept for reuse.
    """

    def __init__(self, video_keys: Iterable[str], keep: int = 4):
        self.video_keys, self.keep = tuple(video_keys), keep
        self._buffers: list[torch.UntypedStorage] = []

    def __getstate__(self):
        return {**self.__dict__, "_buffers": []}

    def __call__(self, batch):
        if not isinstance(batch, dict):
            return batch
        for key in self.video_keys:
            value = batch.get(key)
            if isinstance(value, torch.Tensor) and value.dtype == torch.uint8:
                batch[key] = self.convert(value)
        return batch

    def convert(self, frames: torch.Tensor) -> torch.Tensor:
        """float32 `frames / 255` with the shape of `frames` (uint8)."""
        if frames.device.type != "cpu":
            return frames.float().div_(255.0)
        strides = frames.stride() if _dense(frames) else _contiguous_strides(frames.shape)
        out = torch.empty(0, dtype=torch.float32).set_(self._buffer(frames.numel() * 4), 0, frames.shape, strides)
        np.divide(frames.numpy(), np.float32(255.0), out=out.numpy(), dtype=np.float32)
        return out

    def _buffer(self, nbytes: int) -> torch.UntypedStorage:
        for storage in self._buffers:
            if storage.nbytes() == nbytes and sole_reference(storage):  # only this list holds it
                return storage
        storage = torch.UntypedStorage(nbytes)
        if COUNTS_REFERENCES and len(self._buffers) < self.keep:
            self._buffers.append(storage)
        return storage


def _contiguous_strides(shape) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _dense(t: torch.Tensor) -> bool:
    """Whether `t` covers its memory exactly once in some dimension order (contiguous, channels last...)."""
    order = sorted(range(t.dim()), key=lambda d: t.stride(d), reverse=True)
    shape = [t.shape[d] for d in order]
    return all(t.stride(d) == s for d, s in zip(order, _contiguous_strides(shape), strict=True) if t.shape[d] > 1)


def images_to_float(batch: dict, video_keys: Iterable[str], device: "str | torch.device | None" = None,
                    non_blocking: bool = True) -> dict:
    """A copy of `batch` with each uint8 camera frame tensor (`video_keys`, e.g. `dataset.meta.video_keys`)
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
