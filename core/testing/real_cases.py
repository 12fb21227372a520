"""Generated datasets written the way LeRobot's own tools write real ones (`REAL_CASES`), and the exact samples a
loader must serve from them (`check_batch`): every camera frame read back by its drawn index code, every vector by
its generator value, windows and `_is_pad` by LeRobot's rules. The loader conformance suite runs every case through
every loader; dl's own tests run them through `dl run` and `dl validate`."""

from dataclasses import dataclass, field

import numpy as np

from ..format.depth import DepthQuantizer
from .synthetic_spec import (
    SyntheticConfig,
    action_value,
    depth_code,
    language_messages,
    read_frame_code,
    served_index,
    state_value,
    task_string,
)
from .synthetic_writer import DEPTH_KEY

BASE = SyntheticConfig(episodes=5, frames_per_episode=(9, 15), cameras=2, width=64, height=64, codec="h264", gop=4,
                       episodes_per_file=2, row_group_size=8, state_dim=3, action_dim=2)
"""Small: 5 episodes over 3 data files (so 2 file boundaries), two 64x64 H.264 cameras."""


@dataclass(frozen=True)
class RealCase:
    """A generated dataset (`config`, over `BASE`) and the `LoaderConfig` fields it is read with (`options`)."""

    config: SyntheticConfig
    options: dict = field(default_factory=dict)
    about: str = ""


def _case(about: str, options: dict | None = None, **fields) -> RealCase:
    return RealCase(SyntheticConfig(**{**BASE.__dict__, **fields}), options or {}, about)


REAL_CASES = {
    "converter": _case("meta/episodes names the previous data file for each file's first episode (LeRobot's v2.1 -> "
                       "v3.0 converter)", converter_boundaries=True),
    "recorded": _case("wall-clock timestamps (30 ms offset, 1.5% drift, 2 ms jitter), video at nominal fps, read "
                      "with a raised tolerance_s", {"tolerance_s": 0.06}, recorded_timestamps=(0.03, 0.015, 0.002)),
    "stale_totals": _case("info.json counts 12 episodes, meta/episodes and the data hold 5 (a partial upload); "
                          "the 5 selected", {"episodes": [0, 1, 2, 3, 4]}, info_total_episodes=12),
    "png_images": _case("both cameras as PNG images in the data parquet (use_videos=False)", image_cameras=(0, 1)),
    "jpeg_images": _case("both cameras as JPEG images in the data parquet", image_cameras=(0, 1),
                         image_format="jpeg"),
    "mixed": _case("camera 0 video, camera 1 PNG images", image_cameras=(1,)),
    "depth": _case("a LeRobot 0.6 depth camera (lossless 12-bit HEVC with open GOPs, served in mm)",
                   depth_camera=True),
    "annotations": _case("LeRobot 0.6 language columns and LeRobot 0.4 subtasks", language_columns=True, subtasks=3),
}
"""Every case LeRobot's tools write that dl must read (issue 17), by name."""


def windows(config: SyntheticConfig) -> dict[str, list[float]]:
    """The `delta_timestamps` the window tests ask for: past and future offsets on every camera and the action."""
    fps = config.fps
    cameras = config.camera_keys + ([DEPTH_KEY] if config.depth_camera else [])
    return {**{key: [-2 / fps, 0.0, 1 / fps] for key in cameras}, "action": [-1 / fps, 0.0, 2 / fps],
            "observation.state": [0.0, 3 / fps]}


def check_batch(config: SyntheticConfig, batch: dict, delta: dict[str, list[float]] | None) -> list[int]:
    """Check every sample of a collated `batch` against what LeRobot serves from the dataset `config` describes
    (`sample_problems`).

    Returns:
        the global indices of the batch's samples.

    Raises:
        AssertionError: naming the index and the key that differ.
    """
    indices = [int(i) for i in batch["index"].reshape(-1)]
    for b in range(len(indices)):
        problems = sample_problems(config, {key: value[b] for key, value in batch.items()}, delta)
        assert not problems, "; ".join(problems)
    return indices


def sample_problems(config: SyntheticConfig, sample: dict, delta: dict[str, list[float]] | None,
                    frame_of=None) -> list[str]:
    """What in one sample differs from what LeRobot serves from the dataset `config` describes, in words (empty
    when nothing): camera frames by their index codes (`frame_of(global index)`, default `served_index`: the frame
    nearest each row's timestamp, held within the episode), vectors by the generator's values, windows clamped to
    the episode and flagged in `{key}_is_pad`, `task` and `subtask`."""
    frame_of = frame_of or (lambda i: served_index(config, i))
    lengths = config.episode_lengths()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    index = int(sample["index"])
    offsets = {key: np.rint(np.asarray(d) * config.fps).astype(int) for key, d in (delta or {}).items()}
    episode = int(np.searchsorted(starts, index, side="right")) - 1
    row, length, first = index - int(starts[episode]), int(lengths[episode]), int(starts[episode])
    problems = []
    if int(sample["episode_index"]) != episode:
        problems.append(f"index {index}: episode_index {int(sample['episode_index'])}")
    if sample.get("task") != task_string(episode % config.tasks):
        problems.append(f"index {index}: task {sample.get('task')!r}")
    if config.subtasks and sample.get("subtask") != f"step {(row // 10) % config.subtasks}":
        problems.append(f"index {index}: subtask {sample.get('subtask')!r}")
    for key, value_of in (("observation.state", lambda i: state_value(i, config.state_dim)),
                          ("action", lambda i: action_value(i, config.action_dim))):
        rows = _rows(row, offsets.get(key), length)
        want = np.stack([value_of(first + r) for r in rows])
        if not np.array_equal(np.asarray(sample[key]).reshape(len(rows), -1), want):
            problems.append(f"index {index}: {key}")
        problems += _pad_problems(sample, key, row, offsets.get(key), length, index)
    for camera, key in enumerate(config.camera_keys):
        rows = _rows(row, offsets.get(key), length)
        frames = sample[key] if key in offsets else sample[key][None]
        for frame, r in zip(frames, rows, strict=True):
            try:
                code = read_frame_code(frame)
            except ValueError as exc:
                code = str(exc)
            if code != (frame_of(first + r), camera):
                problems.append(f"index {index}: {key} row {r} shows {code}")
        problems += _pad_problems(sample, key, row, offsets.get(key), length, index)
    if config.depth_camera:
        import torch

        rows = _rows(row, offsets.get(DEPTH_KEY), length)
        frames = sample[DEPTH_KEY] if DEPTH_KEY in offsets else sample[DEPTH_KEY][None]
        for frame, r in zip(frames, rows, strict=True):
            codes = depth_code(served_index(config, first + r), config.width, config.height)
            want = DepthQuantizer().dequantize(torch.from_numpy(codes)[None]).numpy()
            if not np.array_equal(np.asarray(frame), want):
                problems.append(f"index {index}: {DEPTH_KEY} row {r} is not frame {served_index(config, first + r)}")
        problems += _pad_problems(sample, DEPTH_KEY, row, offsets.get(DEPTH_KEY), length, index)
    if config.language_columns:
        persistent, events = language_messages(config, episode, row)
        if sample.get("language_persistent") != persistent or sample.get("language_events") != events:
            problems.append(f"index {index}: language columns {sample.get('language_persistent')!r}, "
                            f"{sample.get('language_events')!r}")
    return problems


def _rows(row: int, offsets, length: int) -> list[int]:
    if offsets is None:
        return [row]
    return np.clip(row + offsets, 0, length - 1).tolist()


def _pad_problems(sample: dict, key: str, row: int, offsets, length: int, index: int) -> list[str]:
    if offsets is None:
        return [f"index {index}: {key}_is_pad without a window"] if f"{key}_is_pad" in sample else []
    want = [not 0 <= row + o < length for o in offsets]
    got = sample.get(f"{key}_is_pad")
    return [] if got is not None and got.tolist() == want else [f"index {index}: {key}_is_pad {got}"]


def every_index(config: SyntheticConfig, options: dict) -> list[int]:
    """The global indices a full epoch of the case serves (its selected episodes' rows)."""
    lengths = config.episode_lengths()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    episodes = options.get("episodes") or range(config.episodes)
    return [i for e in episodes for i in range(int(starts[e]), int(starts[e + 1]))]
