"""The `pool` loader's dataset: a streaming episode pool (IterableDataset) with uniform shuffle, sequential
decode of open chunks under a byte budget, exact and elastic resume and rank/worker splitting."""

import time
from dataclasses import replace
from functools import cached_property, partial

import numpy as np
import torch.utils.data

from dl.contracts.config import LoaderConfig
from dl.contracts.decoder import Decoder
from dl.contracts.errors import DlError, warn
from dl.contracts.needs import DataLoaderNeeds
from dl.contracts.resume import ResumePosition
from dl.contracts.source import FileSpan, Prefetches
from dl.contracts.units import format_bytes, parse_bytes
from dl.dataloader.resume import config_hash, resumed_worker
from dl.dataloader.shared_counters import SharedCounters
from dl.dataloader.shuffle import ideal_distinct_fraction
from dl.dataloader.world import World, current_world, resolve_ranks
from dl.format.checks import check_rows, report_nonfinite
from dl.format.frame_times import load_selection
from dl.format.lerobot_names import LeRobotNames
from dl.format.metadata import DatasetMeta, EpisodeMeta
from dl.format.samples import SampleBuilder
from dl.format.tabular import EpisodeArrays, read_episode_arrays, tabular_keys
from dl.format.timestamp_checks import camera_span

from .chunk_pool import ChunkPool, PoolOrder
from .decode_buffer import DecodeBuffer, chunk_bytes
from .episode_pool import EpisodePool
from .first_draws import ReadAhead, read_ahead
from .gop import episode_gop
from .partition import DEALING, partition_episodes
from .segments import SegmentPlan, current_plan

MAX_AUTO_CHUNK_FRAMES = 16
"""The longest chunk `decode_chunk_frames="auto"` picks: past a GOP or two, longer chunks gain little decode speed
and cost open chunks (shuffle) within the budget."""


def auto_chunk_frames(fitting: int, gop: int | None) -> int:
    """The chunk length `decode_chunk_frames="auto"` picks when chunks of `fitting` frames let the budget keep one
    open per open episode and the episodes' keyframes lie every `gop` frames from their first (`gop.episode_gop`;
    None: unknown): the largest multiple of the GOP up to `fitting` and `MAX_AUTO_CHUNK_FRAMES`, so every chunk
    starts on a keyframe and the decoder decodes each frame once (on open50's GOP 12: 12-frame chunks against
    16, which decode 1.25 frames per frame delivered); `fitting` itself (at least 1, at most the cap) when no
    multiple fits: a longer chunk would leave open episodes without a chunk (a worse shuffle)."""
    plain = int(min(MAX_AUTO_CHUNK_FRAMES, max(fitting, 1)))
    if gop is None or gop > plain:
        return plain
    return gop * (plain // gop)


class PoolDataset(torch.utils.data.IterableDataset, LeRobotNames):
    """Streams every frame of the selected episodes once per epoch, in a uniformly shuffled order, with
    memory bounded by `episode_pool_size` episodes of tabular rows.

    What to iterate: `meta`, `config.episodes`, `config.delta_timestamps` (exact in-RAM slices of the
    episode, any length, LeRobot padding), `config.image_dtype`, `config.tolerance_s`.
    How to iterate: `episode_pool_size`, `drop_last`, and `config.seed`, `config.rank` /
    `config.world_size` (default: `dl.dataloader.world.resolve_ranks`).

    Every (rank x DataLoader worker) pair is a consumer owning a disjoint set of episodes per epoch
    (`partition`). A consumer keeps `episode_pool_size` episodes' rows in RAM; a used-up episode is
    replaced by one drawn uniformly from the consumer's remaining episodes (`episode_pool`). With a decode
    budget, a second level decodes video in order (`chunk_pool`, `decode_buffer`): the open episodes are cut
    into chunks of `decode_chunk_frames` consecutive frames; as many episodes as the budget holds chunks are
    active with one open chunk each, drawn in proportion to their frames left; each chunk is decoded once, in
    order, when its first frame is drawn, and every sample is a random remaining frame of an active episode's
    chunk, the episode drawn in proportion to its frames left. So each frame is decoded about once instead of
    once per sample with a seek, windows included, and with as many open chunks as a consumer has episodes a
    batch mixes as many episodes as a uniform draw would. Without a budget (or with one too small for one
    chunk) a frame is drawn uniformly from the open episodes and decoded as it leaves the pool. Each
    consumer's RNG derives from (seed, epoch, rank, worker). `iter()` advances the epoch; with a plain
    DataLoader and non-persistent workers call `set_epoch(e)`, or use `dl.ResumableDataLoader`, which also
    saves and restores the position (`dl.dataloader.resume`).

    It carries LeRobot's names for what it serves (`dl.format.lerobot_names.LeRobotNames`: `fps`, `features`,
    `num_frames`, `num_episodes`, `camera_keys`, `root`, `repo_id`, `set_image_transforms`).

    The source learns every selected episode's spans up front (`Source.prepare`, in the process that builds
    the loader: a remote source indexes the files there, once), hears of each episode as the pool admits it
    (`Source.admit`, with its data rows and video time spans) and when it leaves (`Source.release`), so a
    remote source fetches ahead only the byte ranges the episode needs.

    Args:
        meta, decoder, config: as every loader (`dl.contracts.loader.Loader`).
        episode_pool_size: episodes open at once per consumer (>= 1); more gives batches from more episodes
            (a better shuffle) for more tabular rows held in RAM.
        drop_last: truncate every consumer to the smallest consumer's sample count, so all ranks take the
            same number of steps.
        decode_budget: bytes of decoded frames each consumer may hold (an int, or a size such as "256M",
            "1G"); 0 decodes each sample on its own. The open chunks are budget // (chunk frames x cameras x
            window offsets x frame bytes); a budget too small for one chunk decodes per sample (with a
            warning). More budget: more open chunks, batches from more episodes (a better shuffle).
        decode_chunk_frames: consecutive frames per chunk (each chunk costs one seek), best a multiple of the
            videos' GOP (`dl diagnose` shows it; LeRobot encodes with GOP 2); "auto": the longest chunk, up to
            `MAX_AUTO_CHUNK_FRAMES`, that lets the budget keep a chunk open for every episode a consumer opens
            (min(pool size, the most episodes a consumer owns in epoch 0), the consumers being world size x
            DataLoader workers: `dl.make_dataloader` tells the loader its workers, `fit_workers`; one per rank
            otherwise), so batches mix as many episodes as without chunks (`benchmarks/results/internals.md`,
            "Pool"), rounded down to a multiple of the GOP where the first episode's videos keep one from their
            first frame (their MP4 index: `gop.episode_gop`, `auto_chunk_frames`), so chunks start on keyframes.

    Raises:
        MissingFilesError, DlError: bad selection, delta_timestamps or options.
    """

    stats_merge = {"episode_pool_size": "same", "episodes_admitted": "sum", "pool_bytes_peak": "sum",
                   "resume_fast_forward_s": "max", "shuffle_randomness_consumer_ideal": "mean",
                   "decode_budget": "same", "decode_open_chunks": "same", "decode_chunk_frames": "same",
                   "chunks_decoded": "sum", "frames_decoded": "sum", "decode_buffer_bytes_peak": "sum"}

    def __init__(self, meta: DatasetMeta, decoder: Decoder, config: LoaderConfig, episode_pool_size: int = 16,
                 drop_last: bool = False, decode_budget: int | str = "256M", decode_chunk_frames: int | str = "auto"):
        if not isinstance(episode_pool_size, int) or episode_pool_size < 1:
            raise DlError(f"pool loader: episode_pool_size must be an integer >= 1, got {episode_pool_size!r}.")
        if decode_chunk_frames != "auto" and not (isinstance(decode_chunk_frames, int) and decode_chunk_frames >= 1):
            raise DlError(f"pool loader: decode_chunk_frames must be 'auto' or an integer >= 1, got "
                          f"{decode_chunk_frames!r}.")
        self.decode_budget = parse_bytes(decode_budget, "pool loader: decode_budget")
        self.pool_size, self.drop_last = episode_pool_size, bool(drop_last)
        self.meta, self.decoder, self.config = meta, decoder, config
        self.episodes = meta.select(config.episodes)
        if not len(self.episodes):
            raise DlError(f"no episodes selected from {meta.source.url}.")
        ranks = resolve_ranks(config.rank, config.world_size)
        self.rank, self.world_size = ranks.rank, ranks.world_size
        self.lengths = self.episodes.lengths
        self.keys = tabular_keys(meta)
        self.builder = SampleBuilder(meta, self.keys, decoder, config)
        self.builder.check_streams(self.episodes)
        self._nonfinite_seen = False  # NaN/inf warned about in this process
        self.prefetches = isinstance(meta.source, Prefetches)
        if self.prefetches:  # a remote source indexes the files and plans the byte ranges, on the host
            meta.source.prepare([span for ep in self.episodes for span in meta.file_spans(ep)])
        load_selection(meta, self.episodes)  # frame times from the indexes (prepare's), carried to workers
        self.chunk_option, self._kept = decode_chunk_frames, False
        self.order = self._order(decode_chunk_frames, self.world_size)
        self.counters = SharedCounters(("episodes_admitted", "pool_bytes_peak", "fast_forward_us", "chunks_decoded",
                                        "frames_decoded", "decode_buffer_bytes_peak"))
        self.epoch = 0
        self._resume: ResumePosition | None = None  # for self.epoch

    def _order(self, chunk_frames: int | str, consumers: int) -> PoolOrder:
        """The emission order's configuration for `consumers` (world size x DataLoader workers): the chunk length
        ("auto": see the class) and the chunks open at once from the budget (0: per-sample decode)."""
        if not self.decode_budget or not self.meta.video_keys:
            return PoolOrder(self.pool_size)
        if chunk_frames == "auto":
            owned = max(len(p) for p in partition_episodes(self.lengths, consumers, self.config.seed, 0))
            open_episodes = max(1, min(self.pool_size, owned))
            fitting = self.decode_budget // (open_episodes * chunk_bytes(self.meta, 1, self.builder.deltas))
            chunk_frames = auto_chunk_frames(fitting, self._gop)
        per_chunk = chunk_bytes(self.meta, chunk_frames, self.builder.deltas)
        if self.decode_budget < per_chunk:
            warn(f"pool loader: decode_budget {format_bytes(self.decode_budget)}B holds no chunk of "
                 f"{chunk_frames} frames ({format_bytes(per_chunk)}B with {len(self.meta.video_keys)} "
                 "camera(s) and their window offsets); decoding each sample on its own. Raise decode_budget "
                 "or lower decode_chunk_frames to decode in order.")
            return PoolOrder(self.pool_size)
        return PoolOrder(self.pool_size, chunk_frames, self.decode_budget // per_chunk)

    @cached_property
    def _gop(self) -> int | None:
        """The first episode's keyframe grid (`gop.episode_gop`: a few ranged reads of its MP4 index), read once
        for every fit."""
        return episode_gop(self.meta, self.episodes[0])

    def fit_workers(self, num_workers: int) -> None:
        """Size "auto" chunks for the episodes a consumer of `num_workers` DataLoader workers per rank opens
        (`dl.contracts.loader.FitsWorkers`; `dl.dataloader.build.build_dataloader` calls it). Nothing changes with
        a chunk length given, or once a resume kept a saved one (`keep_invariants`)."""
        if self.chunk_option == "auto" and not self._kept:
            self.order = self._order("auto", self.world_size * max(num_workers, 1))

    def keep_invariants(self, saved: dict) -> None:
        """With "auto" chunks, take the chunk length a saved state was read with (`resume_invariants`), so a resume
        in another number of workers replays and continues in the saved order; kept from then on."""
        chunk_frames = saved.get("decode_chunk_frames")
        if self.chunk_option != "auto" or not self.order.open_chunks:
            return
        if isinstance(chunk_frames, int) and chunk_frames > 0:
            self.order, self._kept = self._order(chunk_frames, self.world_size), True

    def open_files_wanted(self) -> tuple[int, str]:
        """The video files a consumer reads in turn: its open episodes x cameras (`dl.contracts.loader.OpensFiles`;
        the host keeps that many decoders open unless the user chose the decoder's cache size)."""
        episodes, cameras = min(self.pool_size, len(self.episodes)), len(self.meta.video_keys)
        return episodes * cameras, f"episode_pool_size {self.pool_size}: {episodes} open episodes x {cameras} camera(s)"

    def emit_uint8_frames(self, on: bool = True) -> None:
        """Give uint8 camera frames (`on`) or `config.image_dtype` ones again, from now on, in this process
        (`dl.contracts.loader.DefersFloat`)."""
        self.builder.emit_uint8(on)

    # ----------------------------------------------------------------------------------------- epochs
    def set_epoch(self, epoch: int) -> None:
        """Use this epoch, from its start, on the next `iter()` (e.g. from the training loop, as with
        DistributedSampler); a pending resume is dropped."""
        self.epoch, self._resume = epoch, None

    def resume_invariants(self, batch_size: int, num_workers: int) -> dict:
        """What a resume must not change: the episodes, how they are dealt (`partition.DEALING`), pool size, seed
        and drop_last, and with chunks the chunk length and the number of open chunks (the decode budget counts
        only through it)."""
        invariants = {"episodes": config_hash(self.episodes.index.tolist()), "dealing": DEALING,
                      "episode_pool_size": self.pool_size, "seed": self.config.seed, "drop_last": self.drop_last}
        if self.order.open_chunks:
            invariants.update(decode_chunk_frames=self.order.chunk_frames, decode_open_chunks=self.order.open_chunks)
        return invariants

    def resume_shape(self, batch_size: int, num_workers: int) -> dict:
        """What a resume may change: world size, DataLoader workers (0 and 1 are the same: one consumer per
        rank) and batch size. Each consumer's order depends on them, so another shape replays the emitted
        frames and deals the rest anew (`dl.dataloader.elastic`)."""
        return {"world_size": self.world_size, "num_workers": max(num_workers, 1), "batch_size": batch_size}

    def dataloader_needs(self) -> DataLoaderNeeds:
        """Nothing: the stream orders and splits itself."""
        return DataLoaderNeeds()

    def resume_from(self, position: ResumePosition) -> None:
        """Make the next `iter()` continue epoch `position.epoch` from `position`."""
        self.epoch, self._resume = position.epoch, position

    def resume_position(self) -> ResumePosition | None:
        """The pending resume of the next `iter()` (None: from the epoch's start)."""
        return self._resume

    # ----------------------------------------------------------------------------------------- splitting
    def consumer_episodes(self, world: World, epoch: int) -> list[np.ndarray]:
        """Episode positions of every consumer in this epoch, read in one shape (index with
        `world.consumer`)."""
        return partition_episodes(self.lengths, world.num_consumers, self.config.seed, epoch)

    def segment_plan(self, world: World, epoch: int, position: ResumePosition | None) -> SegmentPlan:
        """What every consumer of `world`'s shape streams in `epoch`: the whole epoch, or after an elastic
        resume what the earlier shapes left (`position.segments`)."""
        segments = position.segments if position is not None else ()
        return current_plan(self.lengths, segments, world.world_size, world.num_workers, self.order,
                            self.config.seed, epoch, self.drop_last)

    def _warn_uneven(self, world: World, parts: list[np.ndarray], counts: list[int]) -> None:
        if len(parts[world.consumer]) == 0:
            warn(f"pool loader: rank {world.rank} worker {world.worker} owns no episodes this epoch: "
                 f"{len(self.episodes)} episodes for {world.num_consumers} consumers (world_size "
                 f"{world.world_size} x {world.num_workers} workers). Use fewer workers.")
        per_rank = [sum(counts[r * world.num_workers:(r + 1) * world.num_workers]) for r in range(world.world_size)]
        if world.consumer == 0 and len(set(per_rank)) > 1:
            warn(f"pool loader: ranks get {min(per_rank)} to {max(per_rank)} samples this epoch; ranks "
                 "that finish early stop first (DDP may then wait on them). Pass drop_last=True to "
                 "truncate every consumer to the smallest count.")

    # ----------------------------------------------------------------------------------------- iteration
    def __iter__(self):
        world = current_world(self.rank, self.world_size)
        epoch, position = self.epoch, self._resume
        self.epoch, self._resume = epoch + 1, None  # iter() advances the epoch in the iterating process
        t0 = time.perf_counter()
        plan = self.segment_plan(world, epoch, position)
        world, skip = resumed_worker(world, position, plan.counts)
        self._warn_uneven(world, plan.episodes, plan.counts)
        return self._stream(world, epoch, plan, skip, time.perf_counter() - t0)

    # ----------------------------------------------------------------------------------------- ServesConsumers
    def _flat_plan(self, epoch: int, num_consumers: int, segments) -> SegmentPlan:
        """The plan of a flat world (`dl.contracts.loader.ServesConsumers`): every consumer a rank of its own."""
        position = ResumePosition(epoch, 0, 1, tuple(segments)) if segments else None
        return self.segment_plan(World(0, num_consumers), epoch, position)

    def consumer_counts(self, epoch: int, num_consumers: int, segments=()) -> list[int]:
        """Samples each consumer of a flat world streams in `epoch` after `segments` (from the partition alone)."""
        return list(self._flat_plan(epoch, num_consumers, segments).counts)

    def consumer_stream(self, epoch: int, consumer: int, num_consumers: int, segments=(), skip: int = 0):
        """One consumer's stream of `epoch`, as a rank of its own in any process, its first `skip` samples
        fast-forwarded in the pool's order (no reads, no decode)."""
        t0 = time.perf_counter()
        plan = self._flat_plan(epoch, num_consumers, segments)
        skip = min(skip, plan.counts[consumer])
        return self._stream(World(consumer, num_consumers), epoch, plan, skip, time.perf_counter() - t0)

    def _stream(self, world: World, epoch: int, plan: SegmentPlan, skip: int, replay_s: float):
        pool = plan.pool(world.consumer, self.lengths, self.order, self.config.seed, epoch)
        count = plan.counts[world.consumer]
        t0 = time.perf_counter()
        for _ in range(skip):  # fast-forward: order only, no reads, no decode
            next(pool)
        if skip or plan.index:
            self.counters.set_max("fast_forward_us", int((time.perf_counter() - t0 + replay_s) * 1e6))
        # the pool as it stands: tell a source that prefetches what it reads, and in which order: first drawn first
        ahead = read_ahead(pool) if self.prefetches else None
        admit = partial(self._admit, pool, ahead)
        for e in pool.open_episodes() if ahead is None else ahead.episodes:
            admit(e)
        pool.on_admit = admit
        buffer = DecodeBuffer(self.builder, self.counters) if isinstance(pool, ChunkPool) else None
        rows: dict[int, tuple[EpisodeMeta, EpisodeArrays]] = {}
        try:
            for _ in range(count - skip):
                e, row, last = next(pool)
                held = rows.get(e)
                if held is None:  # first frame of an admitted episode: read its rows now
                    held = rows[e] = self._read(e)
                    self.counters.add("episodes_admitted")
                    self.counters.set_max("pool_bytes_peak",
                                          sum(a.nbytes for _, x in rows.values() for a in x.values()))
                episode, arrays = held
                sample, queries = self.builder.tabular(arrays, row)
                decoded = None
                if buffer is not None:  # the frames come from the chunk's decoded run(s)
                    decoded = buffer.frames(pool.chunk, episode, arrays, self.builder.requests(episode, queries))
                    if pool.chunk.closed:
                        buffer.drop(pool.chunk)
                if last:
                    del rows[e]
                sample = self.builder.decode(episode, sample, queries, decoded)  # from the chunk, or decoded now
                if last and self.prefetches:
                    self.meta.source.release(episode.index)
                yield sample
        finally:
            pool.on_admit = None
            for e in pool.open_episodes() if self.prefetches else ():
                self.meta.source.release(int(self.episodes.index[e]))

    def _admit(self, pool: EpisodePool | ChunkPool, ahead: ReadAhead | None, e: int) -> None:
        """Tell a source that prefetches (`dl.contracts.source.Prefetches`) that episode `e` (position) is open, with
        the order its chunks will be decoded in (their frames, `FileSpan.reads`), ranked by their first draw
        among all chunks, so it fetches every open episode's open chunk first, then the others as they will be
        read."""
        if ahead is None:
            return
        ep = self.episodes[e]
        order = []
        if ahead is not None and isinstance(pool, ChunkPool):
            order = ahead.ranked(e, pool.read_order(e), pool.chunk_frames)
        self.meta.source.admit(ep.index, self._with_reads(ep, order))

    def _with_reads(self, ep: EpisodeMeta, order: list[tuple[int, int, int]]) -> list[FileSpan]:
        """`ep`'s file spans, its video spans' reads `(first row, last row, rank)` as the file's frames
        (`FileSpan.reads`): the span's first frame plus the row, within the span."""
        frames = {video.path: camera_span(self.meta, ep, key) for key, video in ep.videos.items()} if order else {}
        out = []
        for span in self.meta.file_spans(ep):
            found = frames.get(span.path)
            if found is not None:
                _, start, end = found
                last = max(end - 1, start)
                span = replace(span, reads=tuple((min(start + first, last), min(start + final, last), rank)
                                                 for first, final, rank in order))
            out.append(span)
        return out

    def _read(self, e: int) -> tuple[EpisodeMeta, EpisodeArrays]:
        """Episode `e` (a view) and its rows, checked as they are read (`dl.format.checks.check_rows`); NaN/inf values
        are warned about for the first such episode in this process (`dl validate` counts them all), or refused
        (strict)."""
        ep = self.episodes[e]
        arrays = read_episode_arrays(self.meta, ep, self.keys + self.meta.image_keys)
        _, nonfinite = check_rows(self.meta, ep, arrays, self.config.tolerance_s, self.config.frame_pairing)
        if nonfinite and (self.config.strict or not self._nonfinite_seen):
            self._nonfinite_seen = True
            report_nonfinite(f"{self.meta.source.url}/{ep.data_path}", nonfinite, [ep.index], self.config.strict)
        return ep, arrays

    # ----------------------------------------------------------------------------------------- benchmark
    def reset_stats(self) -> None:
        """Zero the pool counters (the benchmark does so after its single-process pass)."""
        self.counters.reset()

    def figures(self, num_workers: int, batch_size: int) -> dict:
        """Pool figures for `dl run`: pool size; episodes admitted (read into a pool, replays excluded) and
        peak pool bytes (tabular rows held), summed over consumers; the shuffle ceiling of this split (the
        mean over consumers of the expected distinct-episode fraction of a batch drawn uniformly from that
        consumer's frames: a batch comes from one worker, so no loader can beat it); the decode budget per
        consumer, the chunks open at once it allows and their length, chunks and frames decoded (summed over
        consumers: frames decoded per sample, near 1 in `single` mode, shows each frame decoded about once) and
        the peak bytes of decoded frames held, summed over consumers (<= budget x consumers); and, once a resume
        happened, the longest worker replay (s)."""
        totals = self.counters.total()
        world = World(self.rank, self.world_size, 0, max(num_workers, 1))
        parts = self.consumer_episodes(world, 0)[self.rank * world.num_workers:(self.rank + 1) * world.num_workers]
        ideal = [ideal_distinct_fraction(self.lengths[p], batch_size) for p in parts if len(p)]
        stats = {"episode_pool_size": self.pool_size, "episodes_admitted": totals["episodes_admitted"],
                 "pool_bytes_peak": totals["pool_bytes_peak"],
                 "shuffle_randomness_consumer_ideal": round(float(np.mean(ideal)), 4) if ideal else None,
                 "decode_budget": self.decode_budget, "decode_open_chunks": self.order.open_chunks,
                 "decode_chunk_frames": self.order.chunk_frames, "chunks_decoded": totals["chunks_decoded"],
                 "frames_decoded": totals["frames_decoded"],
                 "decode_buffer_bytes_peak": totals["decode_buffer_bytes_peak"]}
        replay_us = int(self.counters.values[:, self.counters.names.index("fast_forward_us")].max())
        return {**stats, "resume_fast_forward_s": replay_us / 1e6} if replay_us else stats
