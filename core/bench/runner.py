"""One benchmark run, in this process: build the plugins a RunSpec names, measure the decode ceiling, time a
single-process pass (`single_process`), iterate a DataLoader over a steady-state window (`window`), probe a resume,
and return the result dict.

Run as `python -m dl.bench.runner SPEC.json RESULT.json` by schedulers, so every run gets a fresh process.
"""

import datetime
import json
import logging
import os
import platform
import re
import sys
import threading
import time
import warnings
from contextlib import contextmanager
from importlib.metadata import version

import numpy as np
import psutil
import torch
import torch.distributed

from ..contracts.config import LoaderConfig
from ..contracts.errors import DlError, DlWarning, describe, show_warnings_as_lines
from ..contracts.loader import Peer, ReportsStats, Resumable
from ..dataloader.build import quiet_fd_sharing
from ..dataloader.shuffle import ideal_distinct_fraction
from ..dataloader.world import resolve_ranks
from ..format.episodes import episode_lengths
from ..format.feature_selection import with_features
from ..host.assembly import Assembly, build_loader, open_dataset
from .ceiling import ceiling_shares
from .ceiling_workers import decode_ceiling
from .contention import ContentionMonitor, busy_line
from .memory import PeakRssMonitor, tree_pss_bytes
from .mixture_run import MixtureAssembly, build_mixture
from .modes import mode_delta_timestamps
from .peer_values import peer_values
from .phase import Progress, no_progress
from .signals import Terminated, stop_once_on_signals
from .single_process import single_process
from .spec import RunSpec
from .timed_decoder import TimedDecoder
from .window import dataloader_for, steady_window


def run_benchmark(spec: RunSpec, progress: Progress = no_progress) -> dict:
    """Measure one configuration. Returns the result dict (see docs/benchmark.md for every field).

    Raises:
        RunFailed: zero samples, or the loader failed mid-run. DlError: bad plugins, dataset or options.
    """
    t_start = time.perf_counter()
    with PeakRssMonitor() as rss, ContentionMonitor() as machine:
        progress = _phases_to(machine, progress)
        progress("prepare", 0, 1)
        built, delta, metadata_s = _build(spec)
        dataset, decoder = built.loader, built.decoder
        init_s = time.perf_counter() - t_start
        progress("prepare", 1, 1)
        with _network_progress(built.source, progress):
            progress("decode ceiling", 0, 1)
            ceiling = decode_ceiling(built.meta, decoder.inner, dataset.episodes[:64],
                                     min(spec.ceiling_s, spec.duration / 2), spec.num_workers)
            progress("decode ceiling", 1, 1)
            single = single_process(dataset, decoder, spec, progress)
            decoder.cache.clear()  # workers must not inherit (and never use) the main process's decoders
            decoder.cache.reset_stats()
            for counted in (dataset, built.source):
                if isinstance(counted, ReportsStats):
                    counted.reset_stats()
            window = steady_window(dataset, spec, progress)
        pss = tree_pss_bytes(psutil.Process())  # while workers are still alive
        loader = window.pop("loader")
        dataloader_facts = loader.facts()
        del window["iterator"]  # shuts the window's workers down before the resume probe starts its own
    loader_stats = _loader_stats(dataset, spec)
    source_stats = _source_stats(built.source, spec)
    resume = _resume_probe(dataset, loader, spec) if isinstance(dataset, Resumable) else {}
    peer = {"peer": _peer(dataset, spec)} if isinstance(dataset, Peer) else {}
    cache = decoder.cache.stats()
    looked_up = cache["hits"] + cache["misses"]
    decoder_cache = {**cache, "hit_rate": round(cache["hits"] / looked_up, 4) if looked_up else None,
                     **({"capacity_from": built.decoder_cache["capacity_from"]} if built.decoder_cache else {})}
    result = {
        "name": spec.name,
        **window,
        **ceiling_shares(window["decoded_frames_per_s"], ceiling, _decodes_in_order(loader_stats)),
        **single,
        "peak_rss_gb": round(rss.peak_bytes / 1e9, 3),
        "pss_gb_at_window_end": round(pss / 1e9, 3),
        "video_decoder_cache": None if peer else decoder_cache,  # a peer decodes with its own decoders
        "shuffle_randomness_ideal": round(ideal_distinct_fraction(_episode_weights(built), spec.batch_size), 4),
        "decode_ceiling": ceiling,
        **({"decoder_calibration": spec.decoder_calibration} if spec.decoder_calibration else {}),
        "init_s": round(init_s, 3),
        "metadata_s": round(metadata_s, 3),
        "build_s": round(init_s - metadata_s, 3),
        "total_time_s": round(time.perf_counter() - t_start, 3),
        **resume,
        **peer,
        **loader_stats,
        **source_stats,
        "dataset": _dataset_summary(built, delta),
        "dataloader": dataloader_facts,
        "config": spec.public_dict(),
        "environment": _environment(),
        "machine_load": _machine_load(machine),
        **_init_parts(built),
    }
    return result


def _phases_to(machine: ContentionMonitor, progress: Progress) -> Progress:
    """`progress`, telling `machine` each phase as it starts (`ContentionMonitor.phase`)."""
    current = [None]

    def report(phase: str, done: float, total: float | None) -> None:
        if phase != "download MB" and phase != current[0]:
            current[0] = phase
            machine.phase(phase)
        progress(phase, done, total)

    return report


def _machine_load(machine: ContentionMonitor) -> dict:
    """The result's `machine_load`: the cores, each phase's `contention` figures, whether any phase was busy and the
    line that says so."""
    line = busy_line(machine.phases, machine.cpu_count)
    return {"cpu_count": machine.cpu_count, "phases": machine.phases, "busy": line is not None,
            **({"busy_line": line} if line else {})}


def _build(spec: RunSpec) -> tuple[Assembly, dict, float]:
    """The plugins a spec names, through the one assembly path (metadata from the host's snapshot when it
    wrote one, so this run lists and reads no metadata and maps the episode columns), the decoder wrapped in
    the decode timer; and the seconds the metadata took (the rest of the build is the loader's)."""
    if spec.mix:
        return build_mixture(spec)
    if spec.root is None:
        raise DlError("the run spec has no root; `dl run` resolves the default dataset before it submits runs.")
    t0 = time.perf_counter()
    meta = open_dataset(spec.root, spec.source, spec.source_options, snapshot=spec.metadata_snapshot)
    metadata_s = time.perf_counter() - t0
    selected = with_features(meta, spec.features) if spec.features else meta  # the mode's windows on selected keys
    delta = {**mode_delta_timestamps(spec.mode, selected), **spec.delta_timestamps}
    config = LoaderConfig(episodes=spec.episodes, delta_timestamps=delta or None, image_dtype=spec.image_dtype,
                          tolerance_s=spec.tolerance_s, frame_pairing=spec.frame_pairing, strict=spec.strict,
                          seed=spec.seed, features=spec.features)
    built = build_loader(meta, spec.loader, spec.decoder, config=config, loader_options=spec.loader_options,
                         decoder_options=spec.decoder_options, wrap_decoder=TimedDecoder)
    return built, delta, metadata_s


def _init_parts(built) -> dict[str, float]:
    """The result's `listing_s`, `metadata_read_s`, `checks_s` and `index_reads_s` (`dl.format.load_times`), summed
    over a mixture's members: listing and reading where the metadata was read (the host, carried in its snapshot),
    checks and index reads in this run."""
    parts = [m.meta.load_times.fields() for m in built.members] if isinstance(built, MixtureAssembly) \
        else [built.meta.load_times.fields()]
    return {key: round(sum(p[key] for p in parts), 3) for key in parts[0]}


def _decodes_in_order(loader_stats: dict) -> bool:
    """Whether the run's loader decodes runs of frames in order (the `pool` loader with open chunks), which may
    legitimately beat the random-access ceiling."""
    return bool((loader_stats.get("loader_stats") or {}).get("decode_open_chunks"))


def _resume_probe(dataset, loader, spec: RunSpec) -> dict:
    """Resume a fresh loader from the window's end state: its first-batch latency (worker start and
    fast-forward included) and, from a loader that reports stats, its stats over the probe."""
    state = loader.state_dict()
    del loader
    if isinstance(dataset, ReportsStats):
        dataset.reset_stats()
    probe = dataloader_for(dataset, spec)
    probe.load_state_dict(state)
    t0 = time.perf_counter()
    next(iter(probe), None)
    probe_s = time.perf_counter() - t0
    stats = _loader_stats(dataset, spec).get("loader_stats")
    return {"resume_first_batch_s": round(probe_s, 3), "resume_state": state,
            **({"resume_loader_stats": stats} if stats is not None else {})}


def _peer(dataset: Peer, spec: RunSpec) -> dict:
    """The result's `peer`: the library a peer loader drives, how it orders samples, and whether its values equal
    dl's (`dl.bench.peer_values`)."""
    return {"library": dataset.library, "order": dataset.order, "shuffled": dataset.shuffled,
            **peer_values(dataset, spec.seed)}


def _episode_weights(built) -> np.ndarray:
    """Each episode's chance of a sample: its frames, or in a mixture its share of its member's frames x the member's
    weight."""
    if isinstance(built, MixtureAssembly):
        return built.episode_weights()
    return episode_lengths(built.loader.episodes)


def _loader_stats(dataset, spec: RunSpec) -> dict:
    """A `ReportsStats` loader's figures, counted since its `reset_stats()` (after the single-process pass),
    with how each combines over ranks."""
    if not isinstance(dataset, ReportsStats):
        return {}
    return {"loader_stats": dataset.figures(spec.num_workers, spec.batch_size),
            "loader_stats_merge": dict(dataset.stats_merge)}


def _source_stats(source, spec: RunSpec) -> dict:
    """A source's own figures when it is `dl.ReportsStats` (remote sources: requests, bytes fetched vs
    needed, retries, 429s, cache hits, network wait), counted over the window, with how each combines over
    ranks."""
    if not isinstance(source, ReportsStats):
        return {}
    return {"source_stats": source.figures(spec.num_workers, spec.batch_size),
            "source_stats_merge": dict(source.stats_merge)}


@contextmanager
def _network_progress(source, progress: Progress, every_s: float = 0.5):
    """While the body runs, report the megabytes a `ReportsStats` source has fetched as the "download MB"
    phase (a bar that shows the run waiting on the network), counted over the whole run: the source's counters are
    zeroed before the window (`reset_stats`), and the bar goes on from where it stood; nothing for other sources."""
    if not isinstance(source, ReportsStats):
        yield
        return
    stop = threading.Event()

    def poll():
        before = last = 0.0  # bytes fetched before the counters were last zeroed; the last reading since
        while not stop.wait(every_s):
            now = float(source.figures().get("bytes_fetched", 0))
            if now < last:
                before += last
            last = now
            progress("download MB", (before + now) / 1e6, None)

    thread = threading.Thread(target=poll, name="dl-network-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _dataset_summary(built: Assembly, delta: dict) -> dict:
    if isinstance(built, MixtureAssembly):
        return built.summary(delta)
    episodes = built.loader.episodes
    return {
        "root": built.source.url,
        "episodes": len(episodes),
        "frames": int(episode_lengths(episodes).sum()),
        "fps": built.meta.fps,
        "cameras": built.meta.camera_keys,
        "delta_timestamps": delta,
    }


def _environment() -> dict:
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchcodec": version("torchcodec"),
        "dl": version("dl"),
        "cpu_count": psutil.cpu_count(),
        "platform": platform.platform(),
        "node": os.environ.get("SLURMD_NODENAME") or platform.node(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def main(argv: list[str]) -> int:
    """`python -m dl.bench.runner SPEC.json RESULT.json`: run one spec and write its result; exit 1 on failure
    (the result file then holds {"name", "status": "failed", "error", "traceback"} for any exception, dl's
    own or not). With `world_size` > 1 this process is one rank (`dl.dataloader.world.resolve_ranks`: RANK /
    WORLD_SIZE, or SLURM's variables) and joins a gloo group at MASTER_ADDR:MASTER_PORT. Ctrl-C (exit 130)
    and SIGTERM (exit 143) stop the run and its DataLoader workers and write nothing."""
    import traceback

    from .progress import rich_progress

    stop_once_on_signals()
    quiet_fd_sharing()
    spec_path, result_path = argv
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("dl").setLevel(logging.INFO)  # what plugins say they are about to do (downloads)
    with open(spec_path) as f:
        spec = RunSpec.from_dict(json.load(f))
    show_warnings_as_lines()
    for message in spec.warned:  # the host printed these once for every run of the command
        warnings.filterwarnings("ignore", message=re.escape(message) + r"\Z", category=DlWarning)
    rank = 0
    try:
        if spec.world_size > 1:
            ranks = resolve_ranks()
            rank = ranks.rank
            spec.name = f"{spec.name}-rank{rank}"
            torch.distributed.init_process_group("gloo", rank=rank, world_size=ranks.world_size,
                                                 timeout=datetime.timedelta(seconds=120))
        with rich_progress(spec.name) as progress:
            result = {"status": "ok", **run_benchmark(spec, progress), "rank": rank}
    except KeyboardInterrupt:
        return 130
    except Terminated:
        return 143
    except Exception as exc:  # any exception, dl's or not, becomes a failed result with its cause
        result = {"name": spec.name, "status": "failed", "error": describe(exc), "config": spec.public_dict()}
        if not isinstance(exc, DlError):
            result["traceback"] = traceback.format_exc()
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    with open(result_path, "w") as f:
        json.dump(result, f, indent=2)
    if result["status"] != "ok":  # one line in the run's own output (a cluster job's log) too
        print(f"run {spec.name} failed: {result['error']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
