"""Loader `pool`: a streaming episode pool (IterableDataset) with uniform shuffle, decode on exit, exact
resume and rank/worker splitting."""

import time
import warnings
from dataclasses import replace

import numpy as np
import torch.utils.data

from dl.config import LoaderConfig
from dl.decoder import Decoder
from dl.episode_pool import EpisodePool
from dl.errors import DlError
from dl.hookspecs import hookimpl
from dl.metadata import DatasetMeta
from dl.metrics import ideal_distinct_fraction
from dl.partition import POOL, epoch_rng, partition_episodes
from dl.resume import config_hash, resume_point
from dl.samples import SampleBuilder
from dl.shared_counters import SharedCounters
from dl.tabular import EpisodeArrays, episode_arrays, read_episode_tables, tabular_keys
from dl.world import World, current_world, resolve_rank

MAX_DECODERS = 256


class PoolDataset(torch.utils.data.IterableDataset):
    """Streams every frame of the selected episodes once per epoch, in a uniformly shuffled order, with
    memory bounded by `episode_pool_size` episodes of tabular rows.

    What to iterate: `meta`, `config.episodes`, `config.delta_timestamps` (exact in-RAM slices of the
    episode, any length, LeRobot padding), `config.image_dtype`, `config.tolerance_s`.
    How to iterate (`config.options`): `episode_pool_size` (episodes open per consumer, default 16),
    `rank` / `world_size` (default: torch.distributed, accelerate, RANK/WORLD_SIZE), `drop_last` (truncate
    every consumer to the smallest consumer's count, so all ranks see equally many samples), and
    `config.seed`.

    Every (rank x DataLoader worker) pair is a consumer owning a disjoint set of episodes per epoch
    (`dl.partition`). A consumer keeps `episode_pool_size` episodes' rows in RAM and emits a frame drawn
    uniformly from the pool's remaining frames; a used-up episode is replaced by one drawn uniformly from
    the consumer's remaining episodes (`dl.episode_pool`). Frames are decoded only as a sample leaves the
    pool. Each consumer's RNG derives from (seed, epoch, rank, worker). `iter()` advances the epoch; with a
    plain DataLoader and non-persistent workers call `set_epoch(e)`, or use `dl.ResumableDataLoader`, which
    also saves and restores the position (`dl.resume`).

    Raises:
        MissingFilesError, DlError: bad selection, delta_timestamps or options.
    """

    def __init__(self, meta: DatasetMeta, decoder: Decoder, config: LoaderConfig):
        options = dict(config.options)
        self.pool_size = int(options.pop("episode_pool_size", 16))
        rank, world_size = options.pop("rank", None), options.pop("world_size", None)
        self.drop_last = bool(options.pop("drop_last", False))
        if options:
            raise DlError(f"pool loader: unknown option(s) {sorted(options)}; it takes episode_pool_size, rank, "
                          "world_size, drop_last.")
        if self.pool_size < 1:
            raise DlError(f"episode_pool_size must be >= 1, got {self.pool_size}.")
        self.meta, self.decoder, self.config = meta, decoder, config
        self.episodes = meta.select(config.episodes)
        if not self.episodes:
            raise DlError(f"no episodes selected from {meta.source.url}.")
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.lengths = np.array([ep.length for ep in self.episodes], dtype=np.int64)
        self.keys = tabular_keys(meta)
        self.builder = SampleBuilder(meta, self.keys, decoder, config)
        self.builder.check_codecs(self.episodes[0])
        working_set = self.pool_size * max(len(meta.video_keys), 1)
        decoder.cache.resize(min(working_set, MAX_DECODERS))
        self.counters = SharedCounters(("episodes_admitted", "pool_bytes_peak", "fast_forward_us"))
        self.epoch = 0
        self._resume: tuple[int, int] | None = None  # (batches_consumed, batch_size) for self.epoch

    # ----------------------------------------------------------------------------------------- epochs
    def set_epoch(self, epoch: int) -> None:
        """Use this epoch, from its start, on the next `iter()` (e.g. from the training loop, as with
        DistributedSampler); a pending resume is dropped."""
        self.epoch, self._resume = epoch, None

    def config_hash(self, num_workers: int, batch_size: int) -> str:
        """What a resume must not change: episodes, pool size, world size, workers, seed, batch size."""
        return config_hash({"episodes": [ep.index for ep in self.episodes], "pool": self.pool_size,
                            "world_size": self.world_size, "workers": num_workers, "seed": self.config.seed,
                            "drop_last": self.drop_last, "batch_size": batch_size})

    def resume_from(self, epoch: int, batches_consumed: int, batch_size: int) -> None:
        """Make the next `iter()` continue epoch `epoch` after `batches_consumed` batches."""
        self.epoch, self._resume = epoch, (batches_consumed, batch_size)

    def resume_batches(self) -> int:
        """Batches the next `iter()` skips (0 unless resuming)."""
        return self._resume[0] if self._resume else 0

    # ----------------------------------------------------------------------------------------- splitting
    def consumer_episodes(self, world: World, epoch: int) -> list[np.ndarray]:
        """Episode positions of every consumer in this epoch (index with `world.consumer`)."""
        return partition_episodes(self.lengths, world.num_consumers, self.config.seed, epoch)

    def consumer_samples(self, parts: list[np.ndarray]) -> list[int]:
        """Samples each consumer emits this epoch (all its frames, or the smallest count with drop_last)."""
        counts = [int(self.lengths[p].sum()) for p in parts]
        return [min(counts)] * len(counts) if self.drop_last else counts

    def _warn_uneven(self, world: World, parts: list[np.ndarray], counts: list[int]) -> None:
        if len(parts[world.consumer]) == 0:
            warnings.warn(f"pool loader: rank {world.rank} worker {world.worker} owns no episodes this epoch: "
                          f"{len(self.episodes)} episodes for {world.num_consumers} consumers (world_size "
                          f"{world.world_size} x {world.num_workers} workers). Use fewer workers.", stacklevel=3)
        per_rank = [sum(counts[r * world.num_workers:(r + 1) * world.num_workers]) for r in range(world.world_size)]
        if world.consumer == 0 and len(set(per_rank)) > 1:
            warnings.warn(f"pool loader: ranks get {min(per_rank)} to {max(per_rank)} samples this epoch; ranks "
                          "that finish early stop first (DDP may then wait on them). Pass drop_last=True to "
                          "truncate every consumer to the smallest count.", stacklevel=3)

    # ----------------------------------------------------------------------------------------- iteration
    def __iter__(self):
        world = current_world(self.rank, self.world_size)
        epoch, resume = self.epoch, self._resume
        self.epoch, self._resume = epoch + 1, None  # iter() advances the epoch in the iterating process
        parts = self.consumer_episodes(world, epoch)
        counts = self.consumer_samples(parts)
        skip = 0
        if resume is not None:
            mine = slice(world.rank * world.num_workers, (world.rank + 1) * world.num_workers)
            produced, next_worker = resume_point(resume[0], resume[1], counts[mine])
            world = replace(world, worker=(world.worker + next_worker) % world.num_workers)
            skip = produced[world.worker]
        self._warn_uneven(world, parts, counts)
        return self._stream(world, epoch, parts[world.consumer], counts[world.consumer], skip)

    def _stream(self, world: World, epoch: int, owned: np.ndarray, count: int, skip: int):
        rng = epoch_rng(self.config.seed, epoch, POOL, world.rank, world.worker)
        pool = EpisodePool(owned, self.lengths[owned], self.pool_size, rng)
        t0 = time.perf_counter()
        for _ in range(skip):  # fast-forward: order only, no reads, no decode
            next(pool)
        if skip:
            self.counters.set_max("fast_forward_us", int((time.perf_counter() - t0) * 1e6))
        rows: dict[int, EpisodeArrays] = {}
        for _ in range(count - skip):
            e, row, last = next(pool)
            arrays = rows.get(e)
            if arrays is None:  # first frame of an admitted episode: read its rows now
                arrays = rows[e] = self._read(e)
                self.counters.add("episodes_admitted")
                self.counters.set_max("pool_bytes_peak", sum(a.nbytes for x in rows.values() for a in x.values()))
            sample, queries = self.builder.tabular(arrays, row)
            if last:
                del rows[e]
            yield self.builder.decode(self.episodes[e], sample, queries)  # decode on exit

    def _read(self, e: int) -> EpisodeArrays:
        ep = self.episodes[e]
        arrays = episode_arrays(read_episode_tables(self.meta, [ep], self.keys)[ep.index], self.meta.features)
        # own copies: zero-copy views would keep the whole Arrow batch they were read in alive
        return {key: np.array(values) for key, values in arrays.items()}

    # ----------------------------------------------------------------------------------------- benchmark
    def reset_benchmark_stats(self) -> None:
        """Zero the pool counters (the benchmark does so after its single-process pass)."""
        self.counters.reset()

    def benchmark_stats(self, num_workers: int, batch_size: int) -> dict:
        """Pool figures for `dl run`: pool size; episodes admitted (read into a pool, replays excluded) and
        peak pool bytes (tabular rows held), summed over consumers; the shuffle ceiling of this split (the
        mean over consumers of the expected distinct-episode fraction of a batch drawn uniformly from that
        consumer's frames: a batch comes from one worker, so no loader can beat it); and, once a resume
        happened, the longest worker replay (s)."""
        totals = self.counters.total()
        world = World(self.rank, self.world_size, 0, max(num_workers, 1))
        parts = self.consumer_episodes(world, 0)[self.rank * world.num_workers:(self.rank + 1) * world.num_workers]
        ideal = [ideal_distinct_fraction(self.lengths[p], batch_size) for p in parts if len(p)]
        stats = {"episode_pool_size": self.pool_size, "episodes_admitted": totals["episodes_admitted"],
                 "pool_bytes_peak": totals["pool_bytes_peak"],
                 "shuffle_randomness_consumer_ideal": round(float(np.mean(ideal)), 4) if ideal else None}
        replay_us = int(self.counters.values[:, self.counters.names.index("fast_forward_us")].max())
        return {**stats, "resume_fast_forward_s": replay_us / 1e6} if replay_us else stats


@hookimpl
def register_loaders(register):
    register("pool", PoolDataset, "streaming episode pool: uniform shuffle, decode on exit, exact resume")
