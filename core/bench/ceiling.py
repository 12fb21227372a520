"""The machine's decode ceiling for the dataset at hand: how many frames per second the run's decoder decodes when
it does nothing else, reading single frames at random positions (what a map-style loader asks for) and whole
episodes in order (what in-order decode can reach), so a run's decoded frames/s can be read as a share of what the
machine could do.

A ceiling is only worth comparing against when it is stable, and one short trial per run is not (two runs of one
configuration can differ by nearly 2x: `benchmarks/results/internals.md`, "Decode ceiling"). So each kind is measured
as several short trials,
after the files were read once (a warm file cache) and every file opened once (untimed), and the ceiling is the
best trial, reported with the trials' spread; and it is measured in the processes the run decodes in, with their
settings: in DataLoader workers (`ceiling_workers`) of the run's start method, each with torch's one intra-op thread
and its share of the cores for camera threads (`dl.dataloader.world.process_cores`), all decoding at once, so
what they take from each other (cores, memory bandwidth) is in the ceiling as it is in the run. Image features
(PNG/JPEG in the data parquet) count as camera frames: their images are decoded with the decoder's
`decode_images`, at random and in runs alike.
"""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ..contracts.decoder import Decoder, FrameRequest
from ..contracts.source import Prefetches
from ..format.metadata import DatasetMeta, EpisodeMeta
from ..format.tabular import read_episode_arrays

RUN_FRAMES = 32
"""Frames per camera per `Decoder.decode` call in the sequential measurement (as LeRobot's anchor `tc_seq` reads
files)."""
TRIALS = 5
"""Trials per kind; the ceiling is the best."""
MIN_TRIAL_FRAMES = 32
"""A trial runs until it has decoded at least this many frames, however long that takes."""
WARM_READ_BYTES = 2 << 30
"""The most bytes of video read once, before the trials, to warm the file cache (local sources only)."""
REMOTE_BYTES = 32 << 20
"""The most bytes of a remote source's episodes (estimated from the listed file sizes and each episode's share)
downloaded once for the trials to decode: a ceiling is decode speed, not the network's (~3 s at 80 Mbit/s)."""
IMAGE_EPISODES = 4
"""Episodes whose image features (PNG/JPEG in the data parquet) are read once, untimed, for the trials to decode."""


def _sync(frames) -> None:
    if frames.data.device.type == "cuda":  # a GPU decoder's frames count once they exist
        import torch

        torch.cuda.synchronize(frames.data.device)


@dataclass
class CeilingPlan:
    """What one process measures: `trials` random and `trials` sequential trials of `trial_s` seconds each (at
    least `MIN_TRIAL_FRAMES` frames), after one untimed pass opening every file; `seed` draws the positions."""

    trial_s: float
    trials: int = TRIALS
    seed: int = 0


def warm_file_cache(meta: DatasetMeta, episodes: list[EpisodeMeta], limit: int = WARM_READ_BYTES) -> int:
    """Read the video files of `episodes` once (a local source only, at most `limit` bytes), so trials do not
    time the disk; returns the bytes read."""
    if not meta.source.is_local:
        return 0
    read = 0
    for path in dict.fromkeys(span.path for ep in episodes for span in ep.videos.values()):
        if read >= limit:
            break
        with meta.source.open(path) as f:
            while read < limit and (block := f.read(1 << 22)):
                read += len(block)
    return read


@contextmanager
def local_copies(meta: DatasetMeta, episodes: list[EpisodeMeta], limit: int = REMOTE_BYTES
                 ) -> Iterator[list[EpisodeMeta]]:
    """The episodes for the trials to decode, held locally while the block runs: `episodes` unchanged for a local
    source, their files read once first (`warm_file_cache`); for a source that prefetches
    (`dl.contracts.source.Prefetches`), the first of them whose bytes fit `limit` (at least one), admitted with
    `wait` (keys `("decode ceiling", episode index)`: downloaded before the block) and released with `drop` after it
    (deleted, so they do not warm the run's window). Trials (and DataLoader workers started inside the block) then
    read cached blocks instead of streaming the same blocks again for every random frame, which would measure the
    network instead of the decoder.

    Raises:
        As `Prefetches.admit` (a download that fails).
    """
    if not isinstance(meta.source, Prefetches):
        warm_file_cache(meta, episodes)
        yield episodes
        return
    chosen, total = {}, 0.0
    for ep in episodes:
        spans = meta.file_spans(ep)
        size = sum((span.size or 0) * span.share for span in spans)
        if chosen and total + size > limit:
            break
        chosen[("decode ceiling", ep.index)] = (ep, spans)
        total += size
    try:
        for key, (_, spans) in chosen.items():
            meta.source.admit(key, spans, wait=True)
        yield [ep for ep, _ in chosen.values()]
    finally:
        for key in chosen:
            meta.source.release(key, drop=True)


def _decode_all(meta: DatasetMeta, decoder: Decoder, requests: list[FrameRequest]) -> int:
    frames = decoder.decode(meta.source, requests)
    for decoded in frames:
        _sync(decoded)
    return sum(len(f.pts_s) for f in frames)


def image_columns(meta: DatasetMeta, episodes: list[EpisodeMeta]) -> list:
    """The `ImageColumn`s of every image feature of the first `IMAGE_EPISODES` episodes, read once (untimed)."""
    held = []
    for ep in episodes[:IMAGE_EPISODES] if meta.image_keys else []:
        arrays = read_episode_arrays(meta, ep, meta.image_keys)
        held += [arrays[key] for key in meta.image_keys]
    return held


def random_trial(meta: DatasetMeta, decoder: Decoder, episodes: list[EpisodeMeta], seconds: float,
                 rng: np.random.Generator, images: list = ()) -> float:
    """Camera frames per second, for at least `seconds` and `MIN_TRIAL_FRAMES` frames: a row drawn uniformly over
    every frame of `episodes`, all its cameras decoded in one `Decoder.decode` call (as a map-style loader asks for
    a sample; uint8), and one image of each image feature (`images`, from `image_columns`: a row drawn at random,
    `Decoder.decode_images`)."""
    lengths = np.array([ep.length for ep in episodes], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    n, t0 = 0, time.perf_counter()
    while n < MIN_TRIAL_FRAMES or time.perf_counter() - t0 < seconds:
        k = int(rng.integers(lengths.sum()))
        e = int(np.searchsorted(starts, k, side="right")) - 1
        row = (k - starts[e]) / meta.fps
        n += _decode_all(meta, decoder, [FrameRequest(span.path, (span.from_timestamp + row,), depth=key in meta.depth)
                                         for key, span in episodes[e].videos.items()])
        for column in images:
            decoder.decode_images([column[int(rng.integers(len(column)))]])
            n += 1
    return n / (time.perf_counter() - t0)


def sequential_trial(meta: DatasetMeta, decoder: Decoder, episodes: list[EpisodeMeta], seconds: float,
                     rng: np.random.Generator, images: list = ()) -> float:
    """Camera frames per second, for at least `seconds` and `MIN_TRIAL_FRAMES` frames: episodes drawn at random,
    each decoded from its first frame in runs of `RUN_FRAMES` consecutive frames, all cameras per
    `Decoder.decode` call (runs decode in order after one seek; uint8), with as many consecutive images of each
    image feature (`images`, one `Decoder.decode_images` call per run)."""
    n, t0 = 0, time.perf_counter()
    while n < MIN_TRIAL_FRAMES or time.perf_counter() - t0 < seconds:
        ep = episodes[int(rng.integers(len(episodes)))]
        for start in range(0, ep.length, RUN_FRAMES):
            rows = np.arange(start, min(start + RUN_FRAMES, ep.length)) / meta.fps
            n += _decode_all(meta, decoder, [FrameRequest(span.path, tuple(span.from_timestamp + rows), run=True,
                                                          depth=key in meta.depth) for key, span in ep.videos.items()])
            for column in images:
                decoder.decode_images(column[(start + np.arange(len(rows))) % len(column)])
                n += len(rows)
            if n >= MIN_TRIAL_FRAMES and time.perf_counter() - t0 >= seconds:
                break
    return n / (time.perf_counter() - t0)


def open_every_file(meta: DatasetMeta, decoder: Decoder, episodes: list[EpisodeMeta]) -> None:
    """Decode one frame of each file of `episodes` (up to the decoder cache's capacity), untimed: opening a file
    is a start-up cost, not decode speed."""
    spans = list({span.path: (key, span) for ep in episodes for key, span in ep.videos.items()}.values())
    for key, span in spans[:decoder.cache.capacity]:
        _decode_all(meta, decoder, [FrameRequest(span.path, (span.from_timestamp,), depth=key in meta.depth)])


def measure_trials(meta: DatasetMeta, decoder: Decoder, episodes: list[EpisodeMeta], plan: CeilingPlan) -> dict:
    """One process's trials: `{"random": [frames/s, ...], "sequential": [...]}`, each list `plan.trials` long
    (the random trials first, then the sequential ones), after `open_every_file`."""
    rng = np.random.default_rng(plan.seed)
    open_every_file(meta, decoder, episodes)
    images = image_columns(meta, episodes)
    out = {"random": [random_trial(meta, decoder, episodes, plan.trial_s, rng, images) for _ in range(plan.trials)],
           "sequential": [sequential_trial(meta, decoder, episodes, plan.trial_s, rng, images)
                          for _ in range(plan.trials)]}
    decoder.cache.clear()
    return out


def spread_pct(rates: list[float]) -> float:
    """How far apart trials are: (fastest - slowest) / fastest, in %."""
    return round(100 * (max(rates) - min(rates)) / max(rates), 1) if rates and max(rates) > 0 else 0.0


def summarize(decoder: str, seconds: float, processes: int, trials: dict[str, list[float]], where: str) -> dict:
    """The `decode_ceiling` result field from trials summed over the processes that ran at once
    (`{"random": [...], "sequential": [...]}`, frames/s per trial): per kind the best trial as the ceiling
    (`{kind}_frames_per_s`, and per process), every trial and their spread."""
    out = {"decoder": decoder, "seconds": round(seconds, 3), "processes": processes, "measured_in": where}
    for kind, rates in trials.items():
        best = max(rates)
        out[f"{kind}_frames_per_s"] = round(best, 1)
        out[f"{kind}_frames_per_s_per_process"] = round(best / processes, 1)
        out[f"{kind}_trials_frames_per_s"] = [round(r, 1) for r in rates]
        out[f"{kind}_spread_pct"] = spread_pct(rates)
    return out


def ceiling_shares(decoded_frames_per_s: float, ceiling: dict | None, in_order: bool = False) -> dict:
    """`decoded_frames_pct_of_random_ceiling` and `..._sequential_ceiling`: a run's decoded frames/s as a
    percentage of the ceiling (empty without one); where a share is above 100% (of the sequential ceiling, or of
    the random one by a loader that does not decode in order, `in_order`: the `pool` loader's chunks may
    legitimately beat random access) the ceiling was measured low, e.g. while something else ran:
    `decode_ceiling_exceeded` lists those kinds and `decode_ceiling_warning` says so in a sentence."""
    if not ceiling:
        return {}
    out = {f"decoded_frames_pct_of_{kind}_ceiling": round(100 * decoded_frames_per_s / ceiling[f"{kind}_frames_per_s"],
                                                          1)
           for kind in ("random", "sequential") if ceiling[f"{kind}_frames_per_s"]}
    over = [kind for kind in ("random", "sequential") if out.get(f"decoded_frames_pct_of_{kind}_ceiling", 0) > 100
            and not (kind == "random" and in_order)]
    if over:
        spreads = ", ".join(f"{kind} trials spread {ceiling.get(f'{kind}_spread_pct', '?')}%" for kind in over)
        out["decode_ceiling_exceeded"] = over
        out["decode_ceiling_warning"] = (f"the run decoded faster than the {' and '.join(over)} ceiling: the ceiling "
                                         f"was measured low ({spreads}); something else was probably running. "
                                         "Re-run on a quiet machine.")
    return out
