"""The machine's decode ceiling for the dataset at hand: how many frames per second one process decodes with the
run's decoder, picking single frames at random (what a map-style loader asks for) and decoding runs of
consecutive frames (what sequential decode can reach), so a run's decoded frames/s can be read as a share of
what the machine could do. Image features (PNG/JPEG in the data parquet) count as camera frames: their images are
decoded with the decoder's `decode_images`, at random and in runs alike."""

import time

import numpy as np

from ..contracts.decoder import Decoder
from ..format.metadata import DatasetMeta, EpisodeMeta
from ..format.tabular import read_episode_arrays

IMAGE_EPISODES = 4
"""Episodes whose encoded images the ceiling holds in memory to decode from (image features only)."""

RUN_FRAMES = 32
"""Frames per `frames_in_run` call in the sequential measurement (as LeRobot's anchor `tc_seq` reads files)."""


def _sync(frames) -> None:
    if frames.data.device.type == "cuda":  # a GPU decoder's frames count once they exist
        import torch

        torch.cuda.synchronize(frames.data.device)


def _image_columns(meta: DatasetMeta, episodes: list[EpisodeMeta]) -> list[tuple[EpisodeMeta, str, object]]:
    """(episode, image key, its `ImageColumn`) for the first `IMAGE_EPISODES` episodes, read once (untimed)."""
    held = []
    for ep in episodes[:IMAGE_EPISODES] if meta.image_keys else []:
        arrays = read_episode_arrays(meta, ep, meta.image_keys)
        held += [(ep, key, arrays[key]) for key in meta.image_keys]
    return held


def random_frames_per_s(meta: DatasetMeta, decoder: Decoder, episodes: list[EpisodeMeta], seconds: float,
                        seed: int = 0) -> float:
    """Single frames (one `frames_at` call each, uint8; one `decode_images` call per image of an image feature)
    drawn uniformly over every camera frame of `episodes` (images: of the first `IMAGE_EPISODES`), per second, for
    about `seconds` in this process after one untimed frame per file (up to the decoder cache's capacity: opening
    is a start-up cost)."""
    rng = np.random.default_rng(seed)
    cameras = meta.video_keys
    spans = [(ep, ep.videos[key]) for ep in episodes for key in cameras]
    images = _image_columns(meta, episodes)
    lengths = np.array([ep.length for ep, _ in spans] + [len(column) for _, _, column in images], dtype=np.int64)
    for _, span in list({s.path: (e, s) for e, s in spans}.values())[:decoder.cache.capacity]:
        _sync(decoder.frames_at(meta.source, span.path, [span.from_timestamp]))
    starts = np.cumsum(lengths) - lengths
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        k = int(rng.integers(lengths.sum()))
        which = int(np.searchsorted(starts, k, side="right")) - 1
        if which >= len(spans):
            decoder.decode_images([images[which - len(spans)][2][k - starts[which]]])
        else:
            _, span = spans[which]
            _sync(decoder.frames_at(meta.source, span.path, [span.from_timestamp + (k - starts[which]) / meta.fps]))
        n += 1
    return n / (time.perf_counter() - t0)


def sequential_frames_per_s(meta: DatasetMeta, decoder: Decoder, episodes: list[EpisodeMeta], seconds: float,
                            seed: int = 0) -> float:
    """Consecutive frames (`frames_in_run`, RUN_FRAMES per call, uint8; `decode_images` of RUN_FRAMES images for an
    image feature) of episodes and cameras drawn at random, each from its first frame, per second, for about
    `seconds` in this process."""
    rng = np.random.default_rng(seed)
    images = _image_columns(meta, episodes)
    sources = [("video", key) for key in meta.video_keys] + [("image", i) for i in range(len(images))]
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        kind, which = sources[int(rng.integers(len(sources)))]
        if kind == "image":
            column = images[which][2]
            for start in range(0, len(column), RUN_FRAMES):
                rows = np.arange(start, min(start + RUN_FRAMES, len(column)))
                decoder.decode_images(column[rows])
                n += len(rows)
                if time.perf_counter() - t0 >= seconds:
                    break
            continue
        ep = episodes[int(rng.integers(len(episodes)))]
        span = ep.videos[which]
        for start in range(0, ep.length, RUN_FRAMES):
            stamps = [span.from_timestamp + r / meta.fps for r in range(start, min(start + RUN_FRAMES, ep.length))]
            _sync(decoder.frames_in_run(meta.source, span.path, stamps))
            n += len(stamps)
            if time.perf_counter() - t0 >= seconds:
                break
    return n / (time.perf_counter() - t0)


def decode_ceiling(meta: DatasetMeta, decoder: Decoder, episodes: list[EpisodeMeta], seconds: float,
                   processes: int) -> dict | None:
    """The ceiling as a result field: random and sequential frames/s per process (each measured for half of
    `seconds`), and times `processes` (the processes that decode in the run: DataLoader workers, or 1). None
    for a dataset without cameras or `seconds` <= 0."""
    if seconds <= 0 or not meta.camera_keys:
        return None
    random_rate = random_frames_per_s(meta, decoder, episodes, seconds / 2)
    sequential_rate = sequential_frames_per_s(meta, decoder, episodes, seconds / 2)
    decoder.cache.clear()
    return {"decoder": decoder.name, "seconds": round(seconds, 3), "processes": processes,
            "random_frames_per_s_per_process": round(random_rate, 1),
            "sequential_frames_per_s_per_process": round(sequential_rate, 1),
            "random_frames_per_s": round(random_rate * processes, 1),
            "sequential_frames_per_s": round(sequential_rate * processes, 1)}


def ceiling_shares(decoded_frames_per_s: float, ceiling: dict | None) -> dict:
    """`decoded_frames_pct_of_random_ceiling` and `..._sequential_ceiling`: a run's decoded frames/s as a
    percentage of the ceiling (empty without one)."""
    if not ceiling:
        return {}
    return {f"decoded_frames_pct_of_{kind}_ceiling": round(100 * decoded_frames_per_s / ceiling[f"{kind}_frames_per_s"],
                                                           1)
            for kind in ("random", "sequential") if ceiling[f"{kind}_frames_per_s"]}
