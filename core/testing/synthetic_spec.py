"""What a synthetic dataset holds (`dl.testing.synthetic`): its configuration (`SyntheticConfig`), every value as a
pure function of the frame's global index (`state_value`, `action_value`, `timestamps`, `served_index`) and each
camera frame's drawn index code (`frame_code`, read back by `read_frame_code`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

CODECS = ("av1", "h264", "hevc", "mpeg4")
_CODEC_ARGS = {
    "av1": ["-c:v", "libsvtav1", "-preset", "12", "-crf", "30"],
    "h264": ["-c:v", "libx264", "-preset", "veryfast", "-crf", "18", "-sc_threshold", "0"],
    # closed GOPs: with x265's default open GOPs, torchcodec's approximate seeking returns the next frame
    "hevc": ["-c:v", "libx265", "-preset", "ultrafast", "-crf", "20", "-tag:v", "hvc1",
             "-x265-params", "log-level=error:scenecut=0:open-gop=0"],
    "mpeg4": ["-c:v", "mpeg4", "-q:v", "2"],
}
"""FFmpeg encoder arguments per codec (the writer reads them from here)."""
IMAGE_FORMATS = ("png", "jpeg")
INDEX_BITS, CAMERA_BITS = 24, 3
_ROWS, _COLS = 4, 8  # frame_code grid: cells of height/4 x width/8 pixels (24x16 at 128x96)
_MARKERS = {0: True, _COLS - 1: False, (_ROWS - 1) * _COLS: False, _ROWS * _COLS - 1: True}  # corner cells
_DATA_CELLS = [k for k in range(_ROWS * _COLS) if k not in _MARKERS]  # 24 index + 3 camera + 1 parity
_MARGIN = 64  # a cell whose mean luma is within this of 128 is unreadable
MAX_TEXTURE, TEXTURE_BLOCK = 48, 8  # frame_code's texture: at most 48 luma levels, in blocks of 8x8 pixels
_TASK_PHRASES = ("pick the red cube", "push the green block", "stack the blue cup",
                 "open the top drawer", "place the yellow ball in the bin", "wipe the white table")


def camera_key(camera: int) -> str:
    """Feature and video key of camera number ``camera``: ``observation.images.cam{camera}``."""
    return f"observation.images.cam{camera}"


def task_string(task_index: int) -> str:
    """Task text of ``task_index`` (0 -> "pick the red cube", 1 -> "push the green block", ...); distinct."""
    variant, phrase = divmod(task_index, len(_TASK_PHRASES))
    return f"{_TASK_PHRASES[phrase]} (variant {variant})" if variant else _TASK_PHRASES[phrase]


@dataclasses.dataclass(frozen=True)
class SyntheticConfig:
    """Shape of a generated dataset; every field is checked on construction (``ValueError`` if invalid).

    - ``episodes`` >= 1; ``frames_per_episode`` inclusive (min, max) length, drawn per episode from ``seed``
      (see ``episode_lengths``); total frames < 2**24. ``fps`` >= 1 frames per second.
    - ``cameras`` 0-8, keys ``camera_key(0..cameras-1)``; ``width``/``height`` pixels, multiples of 16, >= 64.
    - ``codec`` one of ``CODECS``; ``gop`` keyframe interval in frames (>= 1).
    - ``episodes_per_file`` episodes share one data parquet and one mp4 per camera; ``row_group_size`` rows
      per data row group (``None``: one per file).
    - ``state_dim``/``action_dim`` 1-256; ``tasks`` >= 1 distinct tasks, episode ``e`` gets ``e % tasks``.
    - ``info_codec``: written as ``video.codec`` in info.json instead of the real codec, if given.
    - ``texture`` 0-48: ``frame_code``'s texture in luma levels (0: flat cells, ~250 bytes per 640x480 AV1
      frame; 44: ~6 KB, a real robot camera's bitrate, open50's is ~6.5 KB).

    What LeRobot's tools write for real datasets:

    - ``image_cameras``: camera numbers stored as images in the data parquet (dtype "image", the
      ``datasets.Image`` struct ``{bytes, path}``, as ``LeRobotDataset.create(use_videos=False)`` and
      LIBERO-style datasets store them) instead of video, in ``image_format`` ("png" or "jpeg", quality 95); the
      other cameras stay video (a mixed dataset).
    - ``recorded_timestamps``: ``(offset_s, drift, jitter_s)``: row ``k``'s timestamp is
      ``offset_s + k * (1 + drift) / fps`` plus uniform noise in ``[-jitter_s, jitter_s]`` (``timestamps``), as a
      recorder writing wall-clock times does, while the video stays at the nominal fps, one frame per row.
    - ``converter_boundaries``: meta/episodes names the previous data file for the first episode of every data
      file but the first, as LeRobot's v2.1 -> v3.0 converter (<= 0.4.x) writes it.
    - ``info_total_episodes``: info.json counts this many episodes (and proportionally more frames) while
      meta/episodes and the data hold ``episodes`` (a partial upload).
    - ``depth_camera``: a camera ``observation.images.depth`` as LeRobot 0.6.1's writer stores depth maps: lossless
      12-bit HEVC (gray12le, x265 ``lossless=1``, its default open GOPs: leading B-frames before every keyframe),
      ``is_depth_map`` and the quantizer's ``video.depth_min`` / ``depth_max`` / ``shift`` / ``use_log`` (LeRobot's
      defaults) in the feature's ``info``; frame ``index`` holds the codes ``depth_code(index)``.
    - ``open_gop``: H.264 or HEVC cameras encoded with open GOPs (x264 ``open-gop=1`` with 3 B-frames; x265's
      default), whose leading B-frames follow a keyframe in decode order but are shown before it.
    - ``language_columns``: LeRobot 0.6's ``language_persistent`` / ``language_events`` columns (dtype "language",
      ``language_messages``; Arrow types inferred from the values, as its annotation writer leaves them) and the
      ``tools`` list its annotation executor adds to info.json.
    - ``subtasks``: > 0 writes LeRobot 0.4's ``subtask_index`` feature (``(frame_index // 10) % subtasks``) and
      ``meta/subtasks.parquet``.

    Frame times of real recordings (a video's frames off the 1/fps grid of its file; the rows' timestamps stay
    ``frame_index / fps`` unless said otherwise):

    - ``concatenated``: each episode is encoded as its own recording and a file's recordings are joined with FFmpeg's
      concat demuxer and stream copy, as LeRobot's ``concatenate_video_files`` (aggregate, the v2.1 -> v3.0
      converter) joins them; ``from_timestamp`` is the sum of the earlier recordings' stream durations, read back
      from each file (``ffprobe``, as LeRobot's ``get_video_duration_in_s``). The concat demuxer places each
      recording at the earlier ones' container durations, which FFmpeg's muxer rounds to its movie timescale (1000
      unless ``movie_timescale``), so frames may lie off ``from_timestamp`` by up to 0.5 ms per recording, as in
      LeRobot's own aggregated datasets written with FFmpeg's muxer.
    - ``movie_timescale``: with ``concatenated``, each recording's movie (``mvhd``) timescale: the track's (15360 at
      30 fps) places every recording exactly at its ``from_timestamp``.
    - ``recording_tail_s``: with ``concatenated``, each recording's last frame lasts this much longer than 1/fps
      (a recorder stopping after its last frame): durations are not whole frames, and each episode starts off the
      grid of the one before.
    - ``video_rate``: the cameras run at this rate (e.g. ``"30000/1001"``, 29.97 fps) while info.json says ``fps``
      and the rows' timestamps count ``frame_index / fps``: one frame per row, drifting from the timestamps.
    - ``vfr_jitter``: a variable-frame-rate file: frame ``k`` of a file is shown at
      ``(k + vfr_jitter * sin(k)) / fps`` (0 <= vfr_jitter < 0.45), and the rows' timestamps are those times less
      their episode's first (a recorder writing its frames' times).
    - ``edit_list_frames``: each video file is written with this many more leading frames (index codes no row has)
      and cut with stream copy, so its edit list starts the timeline after them (``elst`` media time).
    - B-frames: ``codec="h264"`` (x264 reorders frames; FFmpeg writes composition offsets and an edit list).
    """

    episodes: int = 24
    frames_per_episode: tuple[int, int] = (90, 150)
    fps: int = 30
    cameras: int = 2
    width: int = 128
    height: int = 96
    codec: str = "av1"
    gop: int = 2
    episodes_per_file: int = 4
    row_group_size: int | None = None
    state_dim: int = 6
    action_dim: int = 6
    tasks: int = 2
    seed: int = 0
    info_codec: str | None = None
    texture: int = 0
    image_cameras: tuple[int, ...] = ()
    image_format: str = "png"
    recorded_timestamps: tuple[float, float, float] | None = None
    converter_boundaries: bool = False
    info_total_episodes: int | None = None
    depth_camera: bool = False
    language_columns: bool = False
    subtasks: int = 0
    concatenated: bool = False
    recording_tail_s: float = 0.0
    movie_timescale: int | None = None
    video_rate: str | None = None
    vfr_jitter: float = 0.0
    edit_list_frames: int = 0
    open_gop: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "frames_per_episode", tuple(self.frames_per_episode))  # lists stay hashable
        object.__setattr__(self, "image_cameras", tuple(sorted(set(self.image_cameras))))
        if self.recorded_timestamps is not None:
            object.__setattr__(self, "recorded_timestamps", tuple(float(x) for x in self.recorded_timestamps))
        lo, hi = self.frames_per_episode
        offset, drift, jitter = self.recorded_timestamps or (0.0, 0.0, 0.0)
        checks = [
            (self.codec in CODECS, f"codec must be one of {CODECS}, got {self.codec!r}"),
            (self.episodes >= 1, f"episodes must be >= 1, got {self.episodes}"),
            (1 <= lo <= hi, f"frames_per_episode must be (min, max) with 1 <= min <= max, got {(lo, hi)}"),
            (self.episodes * hi < 2**INDEX_BITS, f"episodes * max frames must be < 2**{INDEX_BITS}"),
            (self.fps >= 1, f"fps must be >= 1, got {self.fps}"),
            (0 <= self.cameras < 2**CAMERA_BITS, f"cameras must be 0..{2**CAMERA_BITS - 1}, got {self.cameras}"),
            (min(self.width, self.height) >= 64 and self.width % 16 == 0 and self.height % 16 == 0,
             f"width and height must be multiples of 16 and >= 64, got {self.width}x{self.height}"),
            (self.gop >= 1, f"gop must be >= 1, got {self.gop}"),
            (self.episodes_per_file >= 1, f"episodes_per_file must be >= 1, got {self.episodes_per_file}"),
            (self.row_group_size is None or self.row_group_size >= 1,
             f"row_group_size must be None or >= 1, got {self.row_group_size}"),
            (1 <= min(self.state_dim, self.action_dim) and max(self.state_dim, self.action_dim) <= 256,
             f"state_dim and action_dim must be 1..256, got {self.state_dim}, {self.action_dim}"),
            (self.tasks >= 1, f"tasks must be >= 1, got {self.tasks}"),
            (self.info_codec is None or bool(self.info_codec), "info_codec must be None or a non-empty string"),
            (0 <= self.texture <= MAX_TEXTURE, f"texture must be 0..{MAX_TEXTURE}, got {self.texture}"),
            (all(0 <= c < self.cameras for c in self.image_cameras),
             f"image_cameras must be camera numbers below cameras={self.cameras}, got {self.image_cameras}"),
            (self.image_format in IMAGE_FORMATS, f"image_format must be one of {IMAGE_FORMATS}"),
            (offset >= 0 and abs(drift) < 0.1 and 0 <= jitter < 0.25 / max(self.fps, 1),
             f"recorded_timestamps must be (offset >= 0, |drift| < 0.1, 0 <= jitter < a quarter frame), got "
             f"{self.recorded_timestamps}"),
            (self.info_total_episodes is None or self.info_total_episodes >= self.episodes,
             "info_total_episodes must be None or >= episodes"),
            (self.subtasks >= 0, f"subtasks must be >= 0, got {self.subtasks}"),
            (self.recording_tail_s >= 0 and (self.concatenated or not self.recording_tail_s),
             "recording_tail_s must be >= 0, and needs concatenated"),
            (self.movie_timescale is None or (self.concatenated and self.movie_timescale > 0),
             "movie_timescale must be None or > 0, and needs concatenated"),
            (self.video_rate is None or _rate(self.video_rate) > 0, f"video_rate must be N/D, got {self.video_rate}"),
            (0 <= self.vfr_jitter < 0.45, f"vfr_jitter must be in [0, 0.45), got {self.vfr_jitter}"),
            (not (self.vfr_jitter and (self.concatenated or self.video_rate or self.recorded_timestamps)),
             "vfr_jitter writes its own timestamps: not with concatenated, video_rate or recorded_timestamps"),
            (self.edit_list_frames >= 0, f"edit_list_frames must be >= 0, got {self.edit_list_frames}"),
            (not self.open_gop or self.codec in ("h264", "hevc"), "open_gop needs codec h264 or hevc"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"SyntheticConfig: {message}")

    @property
    def camera_keys(self) -> list[str]:
        """Camera feature keys (video and image), in camera order."""
        return [camera_key(c) for c in range(self.cameras)]

    @property
    def video_keys(self) -> list[str]:
        """The cameras stored as video, in camera order."""
        return [camera_key(c) for c in range(self.cameras) if c not in self.image_cameras]

    @property
    def image_keys(self) -> list[str]:
        """The cameras stored as images in the data parquet."""
        return [camera_key(c) for c in self.image_cameras]

    def episode_lengths(self) -> np.ndarray:
        """Frames per episode, int64 [episodes], drawn uniformly from ``frames_per_episode`` with ``seed``."""
        lo, hi = self.frames_per_episode
        return np.random.default_rng(self.seed).integers(lo, hi + 1, size=self.episodes, dtype=np.int64)


def _rate(text: str) -> float:
    num, _, den = str(text).partition("/")
    try:
        return float(num) / float(den or 1)
    except (ValueError, ZeroDivisionError):
        return 0.0


def vfr_times(config: SyntheticConfig, count: int) -> np.ndarray:
    """float64 [count]: with ``vfr_jitter``, when frames 0..count-1 of a video file are shown (s)."""
    k = np.arange(count, dtype=np.float64)
    return (k + config.vfr_jitter * np.sin(k)) / config.fps


def timestamps(config: SyntheticConfig) -> np.ndarray:
    """The ``timestamp`` column the generator writes, float32 [total frames]: ``frame_index / fps``, or with
    ``recorded_timestamps`` the recorded times (offset, drift and seeded jitter), or with ``vfr_jitter`` each
    frame's time in its file less its episode's first frame's."""
    lengths = config.episode_lengths()
    frame_index = np.concatenate([np.arange(n) for n in lengths]) if len(lengths) else np.zeros(0)
    if config.vfr_jitter:
        starts = np.concatenate([[0], np.cumsum(lengths)])
        out = []
        for first in range(0, config.episodes, config.episodes_per_file):
            eps = range(first, min(first + config.episodes_per_file, config.episodes))
            times = vfr_times(config, int(starts[eps[-1] + 1] - starts[first]))
            for e in eps:
                own = times[starts[e] - starts[first]:starts[e + 1] - starts[first]]
                out.append(own - own[0])
        return np.concatenate(out).astype(np.float32)
    if config.recorded_timestamps is None:
        return (frame_index / config.fps).astype(np.float32)
    offset, drift, jitter = config.recorded_timestamps
    noise = np.random.default_rng(config.seed + 1).uniform(-jitter, jitter, size=len(frame_index))
    return (offset + frame_index * (1 + drift) / config.fps + noise).astype(np.float32)


def served_index(config: SyntheticConfig, index: int) -> int:
    """The global index whose camera frame a row is served (LeRobot's choice, the frame nearest the row's timestamp,
    held within the row's episode as dl holds it): ``index`` itself unless ``recorded_timestamps``."""
    lengths = config.episode_lengths()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    episode = int(np.searchsorted(starts, index, side="right")) - 1
    frame = int(np.rint(float(timestamps(config)[index]) * config.fps))
    return int(starts[episode]) + min(max(frame, 0), int(lengths[episode]) - 1)


def codec_args(config: SyntheticConfig) -> list[str]:
    """FFmpeg encoder arguments of the cameras: ``_CODEC_ARGS`` of the codec, with open GOPs for ``open_gop``."""
    if config.open_gop and config.codec == "hevc":
        return ["-c:v", "libx265", "-preset", "ultrafast", "-crf", "20", "-tag:v", "hvc1", "-x265-params",
                "log-level=error:scenecut=0"]
    if config.open_gop:
        return [*_CODEC_ARGS["h264"], "-bf", "3", "-x264-params", "open-gop=1"]
    return _CODEC_ARGS[config.codec]


def depth_code(index: int, width: int = 128, height: int = 96) -> np.ndarray:
    """The 12-bit codes of the depth camera's frame of global frame ``index`` (``SyntheticConfig.depth_camera``):
    uint16 [height, width], a horizontal ramp over 0..4095 shifted by ``index`` (mod 4096)."""
    ramp = (np.arange(width, dtype=np.int64)[None, :] * 4095 // max(width - 1, 1)).repeat(height, 0)
    return ((ramp + index) % 4096).astype(np.uint16)


def language_messages(config: SyntheticConfig, episode: int, frame: int) -> tuple[list[dict], list[dict]]:
    """The ``language_persistent`` and ``language_events`` values of frame ``frame`` of ``episode``
    (``SyntheticConfig.language_columns``), as LeRobot 0.6.1's annotation writer lays them out: the episode's
    persistent messages on every frame (a subtask and a plan), events only on the frame they fire on (every frame
    ``frame % 10 == 5``: a user interjection and the assistant's spoken answer, a ``say`` tool call)."""
    persistent = [{"role": "assistant", "content": "1. reach 2. grasp", "style": "plan", "timestamp": 0.0,
                   "camera": None, "tool_calls": None},
                  {"role": "assistant", "content": task_string(episode % config.tasks), "style": "subtask",
                   "timestamp": 0.0, "camera": None, "tool_calls": None}]
    events = [] if frame % 10 != 5 else [
        {"role": "assistant", "content": None, "style": None, "camera": None,
         "tool_calls": [{"type": "function", "function": {"name": "say", "arguments": {"text": f"at {frame}"}}}]},
        {"role": "user", "content": f"frame {frame} of episode {episode}", "style": "interjection", "camera": None,
         "tool_calls": None}]
    return persistent, events


def state_value(index: int | np.ndarray, dim: int) -> np.ndarray:
    """``observation.state`` of global frame ``index``: float32 [..., dim] with element j = index + j/256.

    ``index`` is an int or integer array of any shape (result ``[*shape, dim]``); exact for index < 2**16.
    """
    return (np.asarray(index, dtype=np.float64)[..., None] + np.arange(dim) / 256).astype(np.float32)


def action_value(index: int | np.ndarray, dim: int) -> np.ndarray:
    """``action`` of global frame ``index``: float32 [..., dim] with element j = -(index + 1 + j/256).

    Always negative, so never equal to a state value; broadcasts like ``state_value``.
    """
    return -state_value(np.asarray(index) + 1, dim)


def _code_cells(index: int, camera: int) -> np.ndarray:
    """Bool [_ROWS, _COLS] grid (True = white): markers, index and camera bits LSB first, even parity."""
    if not (0 <= index < 2**INDEX_BITS and 0 <= camera < 2**CAMERA_BITS):
        raise ValueError(f"frame_code needs 0 <= index < 2**{INDEX_BITS} and 0 <= camera < 2**{CAMERA_BITS}")
    payload = index | camera << INDEX_BITS
    bits = [bool(payload >> b & 1) for b in range(INDEX_BITS + CAMERA_BITS)]
    cells = np.zeros(_ROWS * _COLS, dtype=bool)
    cells[_DATA_CELLS] = bits + [sum(bits) % 2 == 1]
    cells[list(_MARKERS)] = list(_MARKERS.values())
    return cells.reshape(_ROWS, _COLS)


def _cell_bounds(size: int, cells: int) -> list[tuple[int, int]]:
    """Pixel ``[start, end)`` of each of ``cells`` near-equal cells along ``size`` pixels."""
    return [(k * size // cells, (k + 1) * size // cells) for k in range(cells)]


def frame_code(index: int, camera: int, *, width: int = 128, height: int = 96, texture: int = 0) -> np.ndarray:
    """Draw camera ``camera``'s frame for global frame ``index``: uint8 [height, width, 3] RGB.

    A 4x8 grid of black (0) / white (255) cells filling the frame, row-major: corner markers (top-left and
    bottom-right white, the other two black), the 24 index bits then 3 camera bits (LSB first) and a cell
    making the data cells' parity even. With ``texture`` (0-48 luma levels), every 8x8-pixel block moves from
    black or white toward gray by a draw from ``0..texture``, redrawn for every frame (seeded by ``(index,
    camera)``), so the video compresses like camera footage, not to a few hundred bytes a frame; cell means stay
    within ``texture`` of 0 or 255, so ``read_frame_code`` still reads it. Raises ``ValueError`` unless
    0 <= index < 2**24, 0 <= camera < 8 and 0 <= texture <= 48.
    """
    if not 0 <= texture <= MAX_TEXTURE:
        raise ValueError(f"frame_code needs 0 <= texture <= {MAX_TEXTURE}, got {texture}")
    rows, cols = _cell_bounds(height, _ROWS), _cell_bounds(width, _COLS)
    frame = np.zeros((height, width, 3), dtype=np.uint8)
    for r, c in np.argwhere(_code_cells(index, camera)):
        frame[slice(*rows[r]), slice(*cols[c])] = 255
    if texture:
        shape = (-(-height // TEXTURE_BLOCK), -(-width // TEXTURE_BLOCK))
        blocks = np.random.default_rng((index, camera)).integers(0, texture + 1, size=shape, dtype=np.uint8)
        shift = blocks.repeat(TEXTURE_BLOCK, 0).repeat(TEXTURE_BLOCK, 1)[:height, :width, None]
        frame = np.where(frame == 255, frame - shift, shift)
    return frame


def _frame_code_stats(white: float, texture: int) -> dict[str, float]:
    """LeRobot's per-channel image stats in [0, 1] of ``frame_code`` frames whose cells are a share ``white`` of
    white: exact without texture, else the texture's expected values (its shifts are equally likely)."""
    shift = np.arange(texture + 1) / 255
    values = np.concatenate([shift, 1 - shift])
    weights = np.repeat([(1 - white) / (texture + 1), white / (texture + 1)], texture + 1)
    mean = float(weights @ values)
    return {"min": 0.0, "max": 1.0, "mean": mean, "std": float(weights @ (values - mean) ** 2) ** 0.5}


def read_frame_code(frame: Any) -> tuple[int, int]:
    """Recover ``(index, camera)`` from a (decoded) ``frame_code`` frame of any size.

    ``frame``: torch tensor or numpy array, [C, H, W] or [H, W, C] with C = 1 or 3 (detected by shape),
    uint8 in 0-255 or float in [0, 1]. The central half of each cell is averaged and thresholded at 128.
    Raises ``ValueError`` for another shape, an ambiguous cell (mean within 64 of 128), a wrong corner
    marker or a parity mismatch.
    """
    if hasattr(frame, "detach"):  # torch.Tensor, without importing torch
        frame = frame.detach().cpu().numpy()
    a = np.asarray(frame)
    if a.ndim != 3 or (a.shape[-1] not in (1, 3) and a.shape[0] not in (1, 3)):
        raise ValueError(f"read_frame_code expects [C,H,W] or [H,W,C] with C in (1, 3), got shape {a.shape}")
    if a.shape[-1] not in (1, 3):
        a = a.transpose(1, 2, 0)
    luma = a.astype(np.float64).mean(axis=2) * (255.0 if np.issubdtype(a.dtype, np.floating) else 1.0)
    means = np.empty((_ROWS, _COLS))
    for r, (y0, y1) in enumerate(_cell_bounds(luma.shape[0], _ROWS)):
        for c, (x0, x1) in enumerate(_cell_bounds(luma.shape[1], _COLS)):
            dy, dx = (y1 - y0) // 4, (x1 - x0) // 4
            means[r, c] = luma[y0 + dy:y1 - dy, x0 + dx:x1 - dx].mean()
    if np.abs(means - 128).min() < _MARGIN:
        raise ValueError(f"unreadable frame code: ambiguous cell means {np.round(means).astype(int).tolist()}")
    cells = (means > 128).ravel()
    if any(cells[k] != white for k, white in _MARKERS.items()):
        raise ValueError("unreadable frame code: corner marker mismatch")
    if cells[_DATA_CELLS].sum() % 2:
        raise ValueError("unreadable frame code: parity mismatch")
    payload = sum(1 << b for b, on in enumerate(cells[_DATA_CELLS][:-1]) if on)
    return payload & (2**INDEX_BITS - 1), payload >> INDEX_BITS
