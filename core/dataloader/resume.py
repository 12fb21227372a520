"""Exact mid-epoch resume from counters alone.

The trainer saves `{"epoch", "batches_consumed", "batch_size", ...}` (see `dl.dataloader.elastic` for the whole
state and for resuming with another world size, worker count or batch size). With a map-style loader the
DataLoader delivers batches in its sampler's order, so the position is `batches_consumed * batch_size`
samples into the epoch's order, whatever the workers. With an IterableDataset,
DataLoader worker `w` builds whole batches from its own stream and the DataLoader hands them out
round-robin over the workers that still have data, so from the batches consumed and each worker's sample
count for the epoch (a pure function of the partition), every worker can re-derive how many samples it had
produced, and replay its order to that point without reading or decoding anything."""

import hashlib
import json
from dataclasses import replace

from ..contracts.errors import ResumeError
from ..contracts.resume import ResumePosition
from .world import World


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


def resumed_worker(world: World, position: ResumePosition | None, counts: list[int]) -> tuple[World, int]:
    """Where DataLoader worker `world.worker` of a streaming loader resumes `position` (None: the epoch's start):
    the role it plays (a resumed DataLoader starts its round-robin at worker 0, so worker `i` continues worker
    `(i + next) % num_workers`, `resume_point`) and the samples that role had produced, to skip.

    Args:
        world: this consumer's place.
        position: the pending resume.
        counts: every consumer's samples this epoch in `world`'s shape, rank-major.

    Returns:
        (the world with the worker whose stream to continue, the samples to skip).
    """
    if position is None:
        return world, 0
    mine = counts[world.rank * world.num_workers:(world.rank + 1) * world.num_workers]
    batches = position.batches
    if batches is None:  # this rank had finished its share
        batches = sum(-(-n // position.batch_size) for n in mine)
    produced, next_worker = resume_point(batches, position.batch_size, mine)
    world = replace(world, worker=(world.worker + next_worker) % world.num_workers)
    return world, produced[world.worker]
