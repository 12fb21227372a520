"""Consistency checks of a LeRobot v3.0 dataset, run as it is opened and read, so that wrong data is refused
instead of served.

The rule: where values would be wrong (a sample would carry another frame, or a window the wrong span),
refuse with a `DatasetFormatError` naming the file, the episode and what to fix; where LeRobot itself
accepts the data and the values stay right, warn once, naming what was found.
"""

import warnings

import numpy as np

from ..contracts.decoder import Decoder, codec_matches
from ..contracts.errors import DatasetFormatError, format_indices

FPS_SLACK = 0.01
"""Relative difference between two frame rates below which they are taken as equal (29.97 vs 30 is not)."""


def check_episode_table(url: str, index: int, fps: int, frame_index: np.ndarray, timestamp: np.ndarray) -> None:
    """Check one episode's rows: `frame_index` is 0, 1, ..., length - 1 and each `timestamp` (seconds, from
    the episode's start, as LeRobot writes them) is within half a frame of `frame_index / fps`.

    A timestamp half a frame or more away decodes another frame than its row's state and action belong to
    (a whole-frame shift still finds frames in the video and fails nowhere else), and a wrong `fps` in
    info.json shows here as timestamps spaced at another rate; both are refused. Vectorised over rows the
    loaders read anyway.

    Args:
        url: names the data file in messages.
        index: the episode index.
        fps: info.json's frames per second.
        frame_index, timestamp: the episode's columns, [length].

    Raises:
        DatasetFormatError: frame_index out of order, or timestamps off by half a frame or more.
    """
    expected = np.arange(len(frame_index))
    if not np.array_equal(np.asarray(frame_index).reshape(-1), expected):
        bad = int(np.flatnonzero(np.asarray(frame_index).reshape(-1) != expected)[0])
        raise DatasetFormatError(f"{url}: episode {index} has frame_index {int(frame_index[bad])} at row {bad}; "
                                 "frame_index must count 0, 1, 2, ... within each episode.")
    ts = np.asarray(timestamp, dtype=np.float64).reshape(-1)
    off = ts - expected / fps
    bad_rows = np.flatnonzero(np.abs(off) >= 0.5 / fps)
    if len(bad_rows):
        row = int(bad_rows[0])
        spacing = float(np.median(np.diff(ts))) if len(ts) > 1 else float("nan")
        if len(ts) > 1 and abs(spacing * fps - 1) > FPS_SLACK:
            cause = (f"its timestamps are spaced {spacing:.6f} s ({1 / spacing:.3f} fps) but meta/info.json says "
                     f"fps {fps}: one of them is wrong, and every delta_timestamps window would have the wrong span")
        else:
            cause = (f"its timestamps are shifted by {off[row]:+.6f} s ({off[row] * fps:+.2f} frames) from "
                     f"frame_index / fps, so each row would get another row's video frame")
        raise DatasetFormatError(f"{url}: episode {index}: row {row} has timestamp {ts[row]:.6f} s and frame_index "
                                 f"{row}: {cause}. Fix the timestamps (frame_index / fps) or the fps in "
                                 "meta/info.json, or leave this episode out.")


def check_episode_meta(url: str, info: dict, episodes) -> None:
    """Check meta/episodes against itself and info.json's totals.

    Refused: an episode whose `dataset_to_index - dataset_from_index` is not its `length`, and episodes
    that info.json's `total_episodes` counts but meta/episodes lacks (they would be dropped silently).
    Warned: a `total_frames` that disagrees with the episodes' lengths while every episode is present.
    Vectorized over the episodes (`episodes`: a `dl.format.episodes.EpisodeColumns`).

    Raises:
        DatasetFormatError: as above, naming the episodes.
    """
    bad = np.flatnonzero(episodes.dataset_to_index - episodes.dataset_from_index != episodes.length)
    if len(bad):
        k = int(bad[0])
        raise DatasetFormatError(
            f"{url}/meta/episodes: episode {int(episodes.index[k])} has length {int(episodes.length[k])} but spans "
            f"global indices [{int(episodes.dataset_from_index[k])}, {int(episodes.dataset_to_index[k])}); restore "
            "meta/episodes from the dataset's origin.")
    total = info.get("total_episodes")
    if isinstance(total, int):
        listed = np.ones(max(total, 0), dtype=bool)
        listed[episodes.index[(episodes.index >= 0) & (episodes.index < total)]] = False
        absent = np.flatnonzero(listed).tolist()
        if absent:
            raise DatasetFormatError(
                f"{url}: meta/info.json counts total_episodes={total} but meta/episodes has no row for episode(s) "
                f"{format_indices(absent)} (it has {len(episodes)}); their data would be dropped silently. Restore "
                "meta/episodes from the dataset's origin (a partial download?).")
    frames = info.get("total_frames")
    read = int(episodes.length.sum())
    if isinstance(frames, int) and frames != read:
        warnings.warn(f"{url}/meta/info.json says total_frames={frames}, but the episodes in meta/episodes hold "
                      f"{read} frames; dl serves the episodes' frames.", stacklevel=3)


def check_streams(meta, decoder: Decoder, episode) -> None:
    """Probe each camera's video of `episode` (one open per camera, in the process that opens the dataset)
    and check it against info.json and the episode (`check_streams_facts`).

    Raises:
        DatasetFormatError: a video too short for the episode. VideoDecodeError: a video cannot be opened.
    """
    for key, span in episode.videos.items():
        check_streams_facts(meta, key, episode, span.path, decoder.probe(meta.source, span.path))


def check_streams_facts(meta, key: str, episode, path: str, facts: dict) -> None:
    """Check camera `key`'s video `path` (its `Decoder.probe` facts) for `episode`. Warned, once, where
    info.json disagrees with the stream but the decoded values stay right: another codec (the stream is
    what gets decoded), another frame rate (frames are picked by time and each is checked against
    `tolerance_s`), a `video.fps` in the feature other than info.json's `fps`.

    Raises:
        DatasetFormatError: the stream is too short for the episode's frames (from_timestamp plus
            (length - 1) / fps lies past its end).
    """
    where = f"{meta.source.url}/{path}"
    claimed, stream = meta.info_codec(key), facts["codec"]
    if claimed and not codec_matches(claimed, stream):
        warnings.warn(f"{meta.source.url}/meta/info.json says camera {key} is {claimed!r}, but {path} is "
                      f"{stream!r}; decoding the stream as {stream}.", stacklevel=3)
    rate = float(facts["average_fps"] or 0)
    if rate and abs(rate / meta.fps - 1) > FPS_SLACK:
        warnings.warn(f"{where} plays at {rate:.3f} fps, meta/info.json says fps {meta.fps}; frames are picked by "
                      "timestamp and checked against tolerance_s, so a sample fails loudly if none fits.",
                      stacklevel=3)
    feature = meta.features[key].get("info") or meta.features[key].get("video_info") or {}
    feature_fps = feature.get("video.fps")
    if isinstance(feature_fps, int | float) and abs(feature_fps / meta.fps - 1) > FPS_SLACK:
        warnings.warn(f"{meta.source.url}/meta/info.json: camera {key} has video.fps {feature_fps} but the "
                      f"dataset's fps is {meta.fps}; dl uses fps {meta.fps} for timestamps and windows.",
                      stacklevel=3)
    span = episode.videos[key]
    last = span.from_timestamp + (episode.length - 1) / meta.fps
    duration = float(facts["duration_s"] or 0)
    if duration and last >= duration + 0.5 / meta.fps:
        raise DatasetFormatError(
            f"{where} lasts {duration:.3f} s, but episode {episode.index} needs frames up to {last:.3f} s "
            f"(from_timestamp {span.from_timestamp:.3f} s in meta/episodes + {episode.length} frames at "
            f"{meta.fps} fps). The video or meta/episodes is wrong; re-download it or leave the episode out.")
