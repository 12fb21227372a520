"""One benchmark run, in this process: build the plugins a RunSpec names, time a single-process pass,
then iterate a DataLoader over a steady-state window, and return the result dict.

Run as `python -m dl.benchmark SPEC.json RESULT.json` by schedulers, so every run gets a fresh process.
"""

import datetime
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from importlib.metadata import version

import numpy as np
import psutil
import torch
import torch.distributed
import torch.utils.data

from .config import LoaderConfig
from .errors import DlError
from .memory import PeakRssMonitor, tree_pss_bytes
from .metadata import DatasetMeta
from .metrics import distinct_episode_fraction, ideal_distinct_fraction, sample_latency_ms
from .modes import mode_delta_timestamps
from .plugins_manager import get_plugins
from .resume import ResumableDataLoader
from .spec import RunSpec
from .timed_decoder import TimedDecoder

Progress = Callable[[str, float, float], None]
"""`progress(phase, done, total)`: called as the run advances (phase names: "prepare", "single-process",
"warm-up", "steady window")."""


class RunFailed(DlError):
    """The run produced no samples or its loader raised; the message says which phase."""


def _noop(phase: str, done: float, total: float) -> None:
    pass


def run_benchmark(spec: RunSpec, progress: Progress = _noop) -> dict:
    """Measure one configuration. Returns the result dict (see docs/benchmark.md for every field).

    Raises:
        RunFailed: zero samples, or the loader failed mid-run. DlError: bad plugins, dataset or options.
    """
    t_start = time.perf_counter()
    with PeakRssMonitor() as rss:
        progress("prepare", 0, 1)
        dataset, meta, decoder, resolved = _build(spec)
        init_s = time.perf_counter() - t_start
        progress("prepare", 1, 1)
        single = _single_process(dataset, decoder, spec, progress)
        decoder.cache.clear()  # workers must not inherit (and never use) the main process's decoders
        decoder.cache.reset_stats()
        if hasattr(dataset, "reset_benchmark_stats"):
            dataset.reset_benchmark_stats()
        window = _window(dataset, meta, spec, progress)
        pss = tree_pss_bytes(psutil.Process())  # while workers are still alive
        loader = window.pop("loader")
        del window["iterator"]  # shuts the window's workers down before the resume probe starts its own
    loader_stats = _loader_stats(dataset, spec)
    resume = _resume_probe(dataset, loader, spec) if isinstance(loader, ResumableDataLoader) else {}
    episodes = dataset_episodes(dataset, meta, spec)
    cache = decoder.cache.stats()
    looked_up = cache["hits"] + cache["misses"]
    result = {
        "name": spec.name,
        **window,
        **single,
        "peak_rss_gb": round(rss.peak_bytes / 1e9, 3),
        "pss_gb_at_window_end": round(pss / 1e9, 3),
        "video_decoder_cache": {**cache, "hit_rate": round(cache["hits"] / looked_up, 4) if looked_up else None},
        "shuffle_randomness_ideal": round(ideal_distinct_fraction([e.length for e in episodes], spec.batch_size),
                                          4),
        "init_s": round(init_s, 3),
        "total_time_s": round(time.perf_counter() - t_start, 3),
        **resume,
        **loader_stats,
        "dataset": _dataset_summary(meta, episodes, resolved),
        "config": spec.to_dict(),
        "environment": _environment(),
    }
    return result


def _build(spec: RunSpec):
    registry = get_plugins().registry
    root = spec.root
    if root is None:
        from .sample_dataset import ensure_default_dataset

        root = str(ensure_default_dataset())
    source = registry.create("source", spec.source, root, **spec.source_options)
    decoder = TimedDecoder(registry.create("decoder", spec.decoder, **spec.decoder_options))
    meta = DatasetMeta.load(source)
    delta = {**mode_delta_timestamps(spec.mode, meta), **spec.delta_timestamps}
    config = LoaderConfig(episodes=spec.episodes, delta_timestamps=delta or None, image_dtype=spec.image_dtype,
                          tolerance_s=spec.tolerance_s, seed=spec.seed, options=spec.loader_options)
    dataset = registry.create("loader", spec.loader, meta, decoder, config)
    return dataset, meta, decoder, {"root": source.url, "delta_timestamps": delta}


def _single_process(dataset, decoder: TimedDecoder, spec: RunSpec, progress: Progress) -> dict:
    """Time up to `single_proc_samples` samples (or `duration` s) in this process, no workers, after one
    untimed sample."""
    if not isinstance(dataset, torch.utils.data.IterableDataset) and len(dataset) == 0:
        raise RunFailed("the loader holds 0 samples; check --episodes and the dataset.")
    loader = iter(_dataloader(dataset, spec, batch_size=None, num_workers=0))
    n = 0
    try:
        next(loader)  # untimed: imports, the first decoder open and the first page faults are start-up costs
        decoder.decode_s, t0 = 0.0, time.perf_counter()
        for _ in loader:
            n += 1
            progress("single-process", n, spec.single_proc_samples)
            if n >= spec.single_proc_samples or time.perf_counter() - t0 >= spec.duration:
                break
    except StopIteration:
        raise RunFailed("the loader yielded 0 samples in the single-process pass; check --episodes.") from None
    except DlError:
        raise
    except Exception as exc:
        raise RunFailed(f"single-process pass failed after {n} samples: {type(exc).__name__}: {exc}") from exc
    total = time.perf_counter() - t0
    if n == 0:
        raise RunFailed("the loader yielded 1 sample in the single-process pass: too few to time.")
    decode = min(decoder.decode_s, total)
    return {
        "single_proc_samples_per_s": round(n / total, 2),
        "fetch_pct": round(100 * (total - decode) / total, 1),
        "decode_pct": round(100 * decode / total, 1),
    }


def _dataloader(dataset, spec: RunSpec, batch_size: int | None, num_workers: int):
    extra = {"prefetch_factor": spec.prefetch_factor, "persistent_workers": True} if num_workers else {}
    if hasattr(dataset, "resume_from"):  # a resumable stream: count batches so the run can probe a resume
        return ResumableDataLoader(dataset, batch_size=batch_size, num_workers=num_workers, **extra)
    iterable = isinstance(dataset, torch.utils.data.IterableDataset)
    return torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, shuffle=not iterable, num_workers=num_workers,
        generator=torch.Generator().manual_seed(spec.seed), **extra)


def _resume_probe(dataset, loader: ResumableDataLoader, spec: RunSpec) -> dict:
    """Resume a fresh loader from the window's end state: its first-batch latency (worker start and
    fast-forward included) and, from a loader that reports it, the longest worker replay."""
    state = loader.state_dict()
    del loader
    probe = _dataloader(dataset, spec, spec.batch_size, spec.num_workers)
    probe.load_state_dict(state)
    t0 = time.perf_counter()
    next(iter(probe), None)
    probe_s = time.perf_counter() - t0
    replay = _loader_stats(dataset, spec).get("loader_stats", {}).get("resume_fast_forward_s")
    return {"resume_first_batch_s": round(probe_s, 3), "resume_fast_forward_s": replay, "resume_state": state}


def _window(dataset, meta: DatasetMeta, spec: RunSpec, progress: Progress) -> dict:
    loader = _dataloader(dataset, spec, spec.batch_size, spec.num_workers)
    arrivals, fractions = [], []
    samples = frames = batches = epochs = 0
    t_iter = time.perf_counter()
    first_batch_s = window_start = None
    if spec.warmup_batches == 0:
        window_start = t_iter
    if torch.distributed.is_initialized():
        torch.distributed.barrier()  # ranks start their windows together
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
        except DlError:
            raise
        except Exception as exc:
            raise RunFailed(f"the DataLoader failed after {batches} batches: {type(exc).__name__}: {exc}") from exc
        now = time.perf_counter()
        batches += 1
        if first_batch_s is None:
            first_batch_s = now - t_iter
        if window_start is None:
            progress("warm-up", batches, spec.warmup_batches)
            if batches == spec.warmup_batches:
                window_start = now
            continue
        size = len(batch["index"])
        arrivals.append(now)
        samples += size
        frames += sum(_frames_in(batch[k]) for k in meta.video_keys if k in batch)
        if size == spec.batch_size:
            fractions.append(distinct_episode_fraction(batch["episode_index"].numpy()))
        elapsed = now - window_start
        progress("steady window", min(elapsed, spec.duration), spec.duration)
        if elapsed >= spec.duration:
            break
    wall = arrivals[-1] - window_start if arrivals else 0.0
    if samples == 0 or wall <= 0:
        raise RunFailed(f"no samples arrived after the {spec.warmup_batches} warm-up batches; lower "
                        "--warmup-batches or use a larger dataset.")
    return {
        "samples_per_s": round(samples / wall, 2),
        "decoded_frames_per_s": round(frames / wall, 2),
        "shuffle_randomness_frac": round(float(np.mean(fractions)), 4) if fractions else None,
        "first_batch_latency_s": round(first_batch_s, 3),
        **sample_latency_ms(arrivals, window_start, spec.batch_size),
        "window_s": round(wall, 3),
        "window_samples": samples,
        "window_batches": len(arrivals),
        "epochs_completed": epochs,
        "loader": loader,
        "iterator": iterator,  # kept alive until memory is measured
    }


def _frames_in(batch_tensor: torch.Tensor) -> int:
    # [B, C, H, W] is one frame per sample; [B, T, C, H, W] is T
    return batch_tensor.shape[0] * (batch_tensor.shape[1] if batch_tensor.dim() == 5 else 1)


def dataset_episodes(dataset, meta: DatasetMeta, spec: RunSpec):
    """The episodes the loader serves (its `episodes` attribute, else the spec's selection)."""
    return getattr(dataset, "episodes", None) or meta.select(spec.episodes)


def _loader_stats(dataset, spec: RunSpec) -> dict:
    """A loader may report its own figures: `benchmark_stats(num_workers, batch_size) -> dict`, counted from
    its last `reset_benchmark_stats()` (called after the single-process pass)."""
    stats = getattr(dataset, "benchmark_stats", None)
    return {"loader_stats": stats(spec.num_workers, spec.batch_size)} if callable(stats) else {}


def _dataset_summary(meta: DatasetMeta, episodes, resolved: dict) -> dict:
    return {
        "root": resolved["root"],
        "episodes": len(episodes),
        "frames": sum(e.length for e in episodes),
        "fps": meta.fps,
        "cameras": meta.video_keys,
        "delta_timestamps": resolved["delta_timestamps"],
    }


def _environment() -> dict:
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchcodec": version("torchcodec"),
        "dl": version("dl"),
        "cpu_count": psutil.cpu_count(),
        "platform": platform.platform(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def main(argv: list[str]) -> int:
    """`python -m dl.benchmark SPEC.json RESULT.json`: run one spec, write its result; exit 1 on failure
    (the result file then holds {"name", "status": "failed", "error"})."""
    from .progress import rich_progress

    spec_path, result_path = argv
    with open(spec_path) as f:
        spec = RunSpec.from_dict(json.load(f))
    rank = int(os.environ.get("RANK", 0))
    if spec.world_size > 1:  # launched once per rank by the scheduler, with MASTER_ADDR/PORT set
        torch.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
        spec.name = f"{spec.name}-rank{rank}"
    try:
        with rich_progress(spec.name) as progress:
            result = {"status": "ok", **run_benchmark(spec, progress), "rank": rank}
    except DlError as exc:
        result = {"name": spec.name, "status": "failed", "error": str(exc), "config": spec.to_dict()}
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    with open(result_path, "w") as f:
        json.dump(result, f, indent=2)
    if result["status"] != "ok":
        print(f"run {spec.name} failed: {result['error']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
