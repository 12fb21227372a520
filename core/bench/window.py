"""A run's steady window: the DataLoader the run measures, iterated through a warm-up and then for the run's
duration, with what it delivered (samples/s and its spread, first batch, latency, shuffle, a timeline)."""

import time

import numpy as np
import torch
import torch.distributed

from ..contracts.errors import DlError, describe
from ..contracts.loader import BatchesItself
from ..dataloader.build import build_dataloader, camera_keys
from ..dataloader.shuffle import distinct_episode_fraction
from .metrics import sample_latency_ms
from .phase import Progress, RunFailed
from .spec import RunSpec
from .steady import block_rates, spread_pct
from .timeline import EpisodesSeen, Timeline

WINDOW_BLOCK_S = 1.0
"""The steady window's blocks, whose samples/s give `samples_per_s_spread_pct`."""


def dataloader_for(dataset, spec: RunSpec):
    """The run's DataLoader over `dataset`: its batch size, workers (persistent, with its prefetch factor) and
    seed; a loader that batches itself (`BatchesItself`: a peer's own reader) gives its batches instead."""
    if isinstance(dataset, BatchesItself):
        return _OwnBatches(dataset, spec)
    extra = {"prefetch_factor": spec.prefetch_factor, "persistent_workers": True} if spec.num_workers else {}
    return build_dataloader(dataset, batch_size=spec.batch_size, num_workers=spec.num_workers, seed=spec.seed,
                            **extra)


def steady_window(dataset, spec: RunSpec, progress: Progress) -> dict:
    """Iterate a fresh `dataloader_for(dataset, spec)` (epochs roll over): untimed until `warmup_batches` batches
    and `warmup_s` seconds (at most a quarter of the window) have passed, then timed for `duration` seconds. Ranks
    start together (a barrier when torch.distributed is up). Returns the window's figures (docs/benchmark.md
    lists them), with the DataLoader (`loader`) and its iterator (`iterator`), kept alive so the caller measures
    memory while the workers still run.

    Raises:
        RunFailed: no samples, or the DataLoader failed. DlError: as raised in a worker (its message kept).
    """
    video_keys = camera_keys(dataset)
    loader = dataloader_for(dataset, spec)
    warmup_s = min(spec.warmup_s, spec.duration / 4)
    arrivals, sizes, fractions = [], [], []
    samples = frames = batches = epochs = 0
    per_camera: dict[str, int] = {}  # frames in the window, per camera key
    if torch.distributed.is_initialized():
        torch.distributed.barrier()  # ranks start their windows together
    t_iter = time.perf_counter()
    timeline, seen = Timeline(t_iter), EpisodesSeen()
    first_batch_s = window_start = None
    if spec.warmup_batches == 0 and warmup_s <= 0:
        window_start = t_iter
        timeline.mark_window(t_iter)
    iterator = iter(loader)
    while True:
        try:
            batch = next(iterator)
        except StopIteration:
            epochs += 1
            if batches == 0:
                raise RunFailed("the loader yielded 0 samples; check --episodes and the dataset.") from None
            iterator = iter(loader)
            continue
        except DlError as exc:  # raised in a DataLoader worker: keep the worker's message, not its traceback
            exc.args = (describe(exc),)
            raise
        except Exception as exc:
            raise RunFailed(f"the DataLoader failed after {batches} batches: {describe(exc)}") from exc
        now = time.perf_counter()
        batches += 1
        timeline.add(now, len(batch["index"]))
        seen.add(epochs, _episode_ids(batch))
        if first_batch_s is None:
            first_batch_s = now - t_iter
        if window_start is None:
            progress("warm-up", min(now - t_iter, warmup_s), warmup_s)
            if batches >= spec.warmup_batches and now - t_iter >= warmup_s:
                window_start = now
                timeline.mark_window(now)
            continue
        size = len(batch["index"])
        arrivals.append(now)
        sizes.append(size)
        samples += size
        for k in video_keys:
            if k in batch:
                per_camera[k] = per_camera.get(k, 0) + _frames_in(batch[k])
        frames = sum(per_camera.values())
        if size == spec.batch_size:
            fractions.append(distinct_episode_fraction(_episode_ids(batch).numpy()))
        elapsed = now - window_start
        progress("steady window", min(elapsed, spec.duration), spec.duration)
        if elapsed >= spec.duration:
            break
    wall = arrivals[-1] - window_start if arrivals else 0.0
    if samples == 0 or wall <= 0:
        raise RunFailed(f"no samples arrived after the warm-up ({spec.warmup_batches} batches, {warmup_s:g} s); lower "
                        "--warmup-batches or use a larger dataset.")
    return {
        "samples_per_s": round(samples / wall, 2),
        "samples_per_s_spread_pct": spread_pct(block_rates(arrivals, sizes, window_start, arrivals[-1],
                                                           WINDOW_BLOCK_S)),
        "decoded_frames_per_s": round(frames / wall, 2),
        "decoded_frames_per_s_by_camera": {k: round(n / wall, 2) for k, n in per_camera.items()},
        "shuffle_randomness_frac": round(float(np.mean(fractions)), 4) if fractions else None,
        "first_batch_latency_s": round(first_batch_s, 3),
        **sample_latency_ms(arrivals, window_start, spec.batch_size),
        "window_s": round(wall, 3),
        "window_samples": samples,
        "window_batches": len(arrivals),
        "epochs_completed": epochs,
        "throughput_timeline": timeline.to_dict(),
        "episodes_by_epoch": seen.to_dict(),
        "loader": loader,
        "iterator": iterator,  # kept alive until memory is measured
    }


class _OwnBatches:
    """A `BatchesItself` loader read like a DataLoader: each `iter()` is an epoch of its own batches."""

    def __init__(self, dataset: BatchesItself, spec: RunSpec):
        self.dataset, self.spec = dataset, spec

    def __iter__(self):
        return iter(self.dataset.batches(self.spec.batch_size, self.spec.num_workers, self.spec.seed))

    def facts(self) -> dict:
        return self.dataset.facts()


def _episode_ids(batch: dict) -> torch.Tensor:
    """The episode of each sample; in a mixture's batch (`dataset_index`), member x 2**32 + episode_index."""
    if "dataset_index" in batch:
        return batch["dataset_index"] * 2**32 + batch["episode_index"]
    return batch["episode_index"]


def _frames_in(batch_tensor: torch.Tensor) -> int:
    # [B, C, H, W] is one frame per sample; [B, T, C, H, W] is T
    return batch_tensor.shape[0] * (batch_tensor.shape[1] if batch_tensor.dim() == 5 else 1)
