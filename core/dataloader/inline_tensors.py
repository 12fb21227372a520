"""Small tensors of a batch cross the DataLoader's worker boundary inside the pickled batch, not in shared memory.

torch sends each CPU tensor of a worker's batch in a shared-memory segment of its own. The main process then fetches
the segment's file descriptor over a socket, with multiprocessing's authentication handshake, once per tensor and
whatever its size, which costs more than pickling a small tensor's bytes (where the two cross:
`benchmarks/results/internals.md`, "Frames across the worker boundary"). A batch's tabular keys (actions, state,
timestamp, index... seven on open50) are a few KB each, so dl's collate (`dl.dataloader.frames.FrameCollate`) stacks
them into `InlineTensor`s, whose pickle carries the bytes and unpickles to a plain tensor: the main process, and a
`pin_memory` thread, receive ordinary tensors. """

import torch
import torch.utils.data
from torch.utils.data._utils.collate import collate, collate_tensor_fn, default_collate_fn_map

INLINE_MAX_BYTES = 64 * 1024
"""The largest collated tensor (bytes) that `collate_inline` sends inline from a worker."""


class InlineTensor:
    """A CPU tensor that pickles as its bytes (a copy) and unpickles to a plain `torch.Tensor` of the same
    dtype and shape (contiguous): for small tensors sent between processes (see the module docstring).

    Args:
        tensor: a dense CPU tensor.
    """

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor

    def __reduce__(self):
        t = self.tensor
        data = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        return _rebuild, (data, t.dtype, tuple(t.shape))


def _rebuild(data: bytes, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    if not data:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)


def _stack(batch: list[torch.Tensor], *, collate_fn_map=None):
    first = batch[0]
    plain = (type(first) is torch.Tensor and first.device.type == "cpu" and first.layout == torch.strided
             and not first.requires_grad)
    if (plain and len(batch) * first.numel() * first.element_size() <= INLINE_MAX_BYTES
            and torch.utils.data.get_worker_info() is not None):
        return InlineTensor(torch.stack(batch))
    return collate_tensor_fn(batch, collate_fn_map=collate_fn_map)


def collate_inline(samples: list):
    """torch's `default_collate`, except that in a DataLoader worker a collated CPU tensor of at most
    `INLINE_MAX_BYTES` comes back as an `InlineTensor` (it unpickles to the same tensor `default_collate` gives).
    Outside a worker the result equals `default_collate`'s. Python numbers are collated as `default_collate`
    does (into shared memory in a worker), and types added to torch's `default_collate_fn_map` are honoured."""
    return collate(samples, collate_fn_map={**default_collate_fn_map, torch.Tensor: _stack})
