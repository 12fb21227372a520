"""Small synthetic but format-true LeRobot v3.0 datasets with real FFmpeg-encoded video.

The layout matches LeRobot 0.4.x: ``data/chunk-CCC/file-FFF.parquet``, one mp4 per camera and file under
``videos/<key>/``, ``meta/episodes/chunk-000/file-000.parquet``, ``meta/tasks.parquet``, ``meta/info.json``
and ``meta/stats.json``. Every value is a pure function of its global frame ``index`` so readers can be
verified exactly: ``state_value``/``action_value`` give the vector columns and ``frame_code`` draws each
video frame as a grid of black/white cells that ``read_frame_code`` decodes back to ``(index, camera)``;
``texture`` gives those frames a camera's bitrate (see ``frame_code``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

CHUNKS_SIZE = 1000
CODECS = ("av1", "h264", "hevc", "mpeg4")
_CODEC_ARGS = {
    "av1": ["-c:v", "libsvtav1", "-preset", "12", "-crf", "30"],
    "h264": ["-c:v", "libx264", "-preset", "veryfast", "-crf", "18", "-sc_threshold", "0"],
    # closed GOPs: with x265's default open GOPs, torchcodec's approximate seeking returns the next frame
    "hevc": ["-c:v", "libx265", "-preset", "ultrafast", "-crf", "20", "-tag:v", "hvc1",
             "-x265-params", "log-level=error:scenecut=0:open-gop=0"],
    "mpeg4": ["-c:v", "mpeg4", "-q:v", "2"],
}
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "frames_per_episode", tuple(self.frames_per_episode))  # lists stay hashable
        lo, hi = self.frames_per_episode
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
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"SyntheticConfig: {message}")

    @property
    def video_keys(self) -> list[str]:
        """Camera feature keys, in camera order."""
        return [camera_key(c) for c in range(self.cameras)]

    def episode_lengths(self) -> np.ndarray:
        """Frames per episode, int64 [episodes], drawn uniformly from ``frames_per_episode`` with ``seed``."""
        lo, hi = self.frames_per_episode
        return np.random.default_rng(self.seed).integers(lo, hi + 1, size=self.episodes, dtype=np.int64)


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


def _encode(ffmpeg: str, path: pathlib.Path, cfg: SyntheticConfig, camera: int, indices: range) -> None:
    """Encode camera ``camera``'s ``frame_code`` frames for global ``indices`` into the mp4 ``path``, piping
    raw rgb24 to one ffmpeg process. Raises ``RuntimeError`` with ffmpeg's stderr tail if it fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [ffmpeg, "-hide_banner", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
           "-s", f"{cfg.width}x{cfg.height}", "-r", str(cfg.fps), "-i", "-", "-an", *_CODEC_ARGS[cfg.codec],
           "-g", str(cfg.gop), "-pix_fmt", "yuv420p", "-y", str(path)]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log)
        try:
            for i in indices:
                frame = frame_code(i, camera, width=cfg.width, height=cfg.height, texture=cfg.texture)
                proc.stdin.write(frame.tobytes())
        except BrokenPipeError:
            pass  # ffmpeg exited early; its exit code and stderr say why
        finally:
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.close()
            code = proc.wait()
        if code != 0:
            log.seek(0)
            tail = log.read()[-3000:].decode(errors="replace")
            raise RuntimeError(f"ffmpeg failed (exit {code}) encoding {path}:\n{tail}")


def _write_parquet(table: pa.Table, path: pathlib.Path, row_group_size: int | None = None) -> None:
    """Write ``table`` with the pandas schema metadata LeRobot's own files carry."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(table.to_pandas(), schema=table.schema, preserve_index=False)
    pq.write_table(table, path, row_group_size=row_group_size or max(table.num_rows, 1))


def _stats(values: np.ndarray) -> dict[str, list]:
    """LeRobot stats of [N] or [N, D] values; min/max keep the dtype."""
    v = values.reshape(len(values), -1)
    return {"min": v.min(0).tolist(), "max": v.max(0).tolist(), "mean": v.mean(0, dtype=np.float64).tolist(),
            "std": v.astype(np.float64).std(0).tolist(), "count": [len(v)]}


def _info(cfg: SyntheticConfig, total_frames: int) -> dict[str, Any]:
    """The ``meta/info.json`` document."""
    video = {"video.height": cfg.height, "video.width": cfg.width, "video.codec": cfg.info_codec or cfg.codec,
             "video.pix_fmt": "yuv420p", "video.is_depth_map": False, "video.fps": cfg.fps, "video.channels": 3,
             "has_audio": False}
    features = {
        "observation.state": {"dtype": "float32", "shape": [cfg.state_dim],
                              "names": [f"joint_{j}.pos" for j in range(cfg.state_dim)]},
        "action": {"dtype": "float32", "shape": [cfg.action_dim],
                   "names": [f"joint_{j}.pos" for j in range(cfg.action_dim)]},
        **{key: {"dtype": "video", "shape": [cfg.height, cfg.width, 3], "names": ["height", "width", "channels"],
                 "info": video} for key in cfg.video_keys},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        **{name: {"dtype": "int64", "shape": [1], "names": None}
           for name in ("frame_index", "episode_index", "index", "task_index")},
    }
    return {"codebase_version": "v3.0", "robot_type": "dl_synthetic", "total_episodes": cfg.episodes,
            "total_frames": total_frames, "total_tasks": cfg.tasks, "chunks_size": CHUNKS_SIZE,
            "data_files_size_in_mb": 100, "video_files_size_in_mb": 200, "fps": cfg.fps,
            "splits": {"train": f"0:{cfg.episodes}"},
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
            "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
            "features": features}


def _write_dataset(dst: pathlib.Path, cfg: SyntheticConfig, ffmpeg: str | None,
                   progress: Callable[[int, int], None] | None) -> None:
    """Write the whole dataset described by ``cfg`` into the existing empty folder ``dst``."""
    lengths = cfg.episode_lengths()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    index = np.arange(starts[-1], dtype=np.int64)
    episode = np.repeat(np.arange(cfg.episodes, dtype=np.int64), lengths)
    frame_index = index - starts[episode]
    columns = {"observation.state": state_value(index, cfg.state_dim),
               "action": action_value(index, cfg.action_dim),
               "timestamp": (frame_index / cfg.fps).astype(np.float32), "frame_index": frame_index,
               "episode_index": episode, "index": index, "task_index": episode % cfg.tasks}
    ep_rows: list[dict[str, Any]] = []
    for file_no, first in enumerate(range(0, cfg.episodes, cfg.episodes_per_file)):
        eps = range(first, min(first + cfg.episodes_per_file, cfg.episodes))
        chunk, file = divmod(file_no, CHUNKS_SIZE)
        rel = f"chunk-{chunk:03d}/file-{file:03d}"
        lo, hi = int(starts[eps[0]]), int(starts[eps[-1] + 1])
        table = pa.table({name: pa.array(list(col[lo:hi]), pa.list_(pa.float32())) if col.ndim == 2 else col[lo:hi]
                          for name, col in columns.items()})
        _write_parquet(table, dst / "data" / f"{rel}.parquet", cfg.row_group_size)
        with ThreadPoolExecutor(max(cfg.cameras, 1)) as pool:  # one ffmpeg per camera, in parallel
            jobs = [pool.submit(_encode, ffmpeg, dst / "videos" / key / f"{rel}.mp4", cfg, cam, range(lo, hi))
                    for cam, key in enumerate(cfg.video_keys)]
            for job in jobs:
                job.result()
        for e in eps:
            from_ts = float(starts[e] - lo) / cfg.fps
            row = {"episode_index": e, "tasks": [task_string(e % cfg.tasks)], "length": int(lengths[e]),
                   "data/chunk_index": chunk, "data/file_index": file,
                   "dataset_from_index": int(starts[e]), "dataset_to_index": int(starts[e + 1])}
            for key in cfg.video_keys:
                row |= {f"videos/{key}/chunk_index": chunk, f"videos/{key}/file_index": file,
                        f"videos/{key}/from_timestamp": from_ts,
                        f"videos/{key}/to_timestamp": from_ts + float(lengths[e]) / cfg.fps}
            ep_rows.append(row | {"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
            if progress is not None:
                progress(e + 1, cfg.episodes)

    ep_schema = pa.schema([(name, pa.list_(pa.string()) if name == "tasks" else
                            pa.float64() if name.endswith("_timestamp") else pa.int64()) for name in ep_rows[0]])
    _write_parquet(pa.Table.from_pylist(ep_rows, schema=ep_schema), dst / "meta/episodes/chunk-000/file-000.parquet")
    tasks = pd.DataFrame({"task_index": np.arange(cfg.tasks, dtype=np.int64)},
                         index=pd.Index([task_string(t) for t in range(cfg.tasks)], dtype=object))
    tasks.to_parquet(dst / "meta" / "tasks.parquet")
    (dst / "meta" / "info.json").write_text(json.dumps(_info(cfg, len(index)), indent=4) + "\n")
    stats = {name: _stats(col) for name, col in columns.items()}
    for cam, key in enumerate(cfg.video_keys):  # equal R, G, B; every frame has both black and white cells
        white = float(np.mean([_code_cells(int(i), cam).mean() for i in index]))  # cells have equal areas
        channel = _frame_code_stats(white, cfg.texture)
        stats[key] = {name: [[[value]]] * 3 for name, value in channel.items()} | {"count": [len(index)]}
    (dst / "meta" / "stats.json").write_text(json.dumps(stats, indent=4) + "\n")


def write_synthetic_dataset(root: str | os.PathLike, config: SyntheticConfig = SyntheticConfig(), *,
                         progress: Callable[[int, int], None] | None = None) -> pathlib.Path:
    """Generate the dataset described by ``config`` at ``root``; return ``root`` as a ``Path``.

    Everything is written into a hidden sibling temp folder that is renamed onto ``root`` at the end, so
    a crash never leaves a partial dataset. ``progress(done_episodes, total_episodes)`` is called for each
    episode once its file is written. Raises ``FileExistsError`` naming ``root`` if it exists and is not an
    empty folder (also when another writer fills it first), ``RuntimeError`` if ffmpeg is missing or fails.
    """
    root = pathlib.Path(root)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise FileExistsError(f"dataset root {root} already exists and is not an empty directory")
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None and config.cameras:
        raise RuntimeError("ffmpeg not found on PATH; install it, e.g. `apt-get install -y ffmpeg`")
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{root.name}.tmp-", dir=root.parent))
    try:
        _write_dataset(tmp, config, ffmpeg, progress)
        tmp.chmod(0o755)
        try:
            os.rename(tmp, root)  # atomic; replaces only a missing or empty directory
        except OSError as exc:
            if root.is_dir() and any(root.iterdir()):
                raise FileExistsError(f"dataset root {root} was filled by another writer") from exc
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return root
