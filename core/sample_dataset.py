"""Small synthetic but format-true LeRobot v3.0 datasets with real FFmpeg-encoded video.

The layout matches LeRobot 0.4.x: ``data/chunk-CCC/file-FFF.parquet``, one mp4 per camera and file under
``videos/<key>/``, ``meta/episodes/chunk-000/file-000.parquet``, ``meta/tasks.parquet``, ``meta/info.json``
and ``meta/stats.json``. Every value is a pure function of its global frame ``index`` so readers can be
verified exactly: ``state_value``/``action_value`` give the vector columns and ``frame_code`` draws each
video frame as a grid of black/white cells that ``read_frame_code`` decodes back to ``(index, camera)``.
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
from typing import Any, Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

DATASET_TAG = "v3.0-s1"  # bump when generated content changes; names the default dataset's cache folder
CHUNKS_SIZE = 1000
CODECS = ("av1", "h264", "hevc", "mpeg4")
_CODEC_ARGS = {
    "av1": ["-c:v", "libsvtav1", "-preset", "12", "-crf", "30"],
    "h264": ["-c:v", "libx264", "-preset", "veryfast", "-crf", "18", "-sc_threshold", "0"],
    "hevc": ["-c:v", "libx265", "-preset", "ultrafast", "-crf", "20", "-tag:v", "hvc1",
             "-x265-params", "log-level=error:scenecut=0"],
    "mpeg4": ["-c:v", "mpeg4", "-q:v", "2"],
}
INDEX_BITS, CAMERA_BITS = 24, 3
_ROWS, _COLS = 4, 8  # frame_code grid; each cell spans height/4 x width/8 pixels (16x24 at 128x96)
_MARKERS = {0: True, _COLS - 1: False, (_ROWS - 1) * _COLS: False, _ROWS * _COLS - 1: True}  # corners
_DATA_CELLS = [k for k in range(_ROWS * _COLS) if k not in _MARKERS]  # 24 index + 3 camera + 1 parity
_MARGIN = 40  # a cell whose mean luma is within this of 128 counts as unreadable
_TASK_PHRASES = ("pick the red cube", "push the green block", "stack the blue cup",
                 "open the top drawer", "place the yellow ball in the bin", "wipe the white table")


def camera_key(camera: int) -> str:
    """Feature / video key of camera number ``camera``: ``observation.images.cam{camera}``."""
    return f"observation.images.cam{camera}"


def task_string(task_index: int) -> str:
    """Task text of ``task_index`` (e.g. 0 -> "pick the red cube"); distinct for every index >= 0."""
    phrase = _TASK_PHRASES[task_index % len(_TASK_PHRASES)]
    variant = task_index // len(_TASK_PHRASES)
    return f"{phrase} (variant {variant})" if variant else phrase


@dataclasses.dataclass(frozen=True)
class SampleDatasetConfig:
    """Shape of a generated dataset. All fields are validated on construction (``ValueError``).

    ``frames_per_episode`` is an inclusive (min, max) length range; lengths are drawn per episode from
    ``seed`` (see ``episode_lengths``). ``cameras`` (0-8) video keys are ``camera_key(0..cameras-1)``;
    ``width``/``height`` in pixels must be multiples of 16 and >= 64. ``codec`` is one of ``CODECS``;
    ``gop`` is the keyframe interval in frames. ``episodes_per_file`` episodes share one data parquet
    file and one mp4 per camera; ``row_group_size`` (rows) splits data files into row groups, ``None``
    meaning one per file. Episode ``e`` gets task ``e % tasks``. ``info_codec``, if set, is written as
    ``video.codec`` in info.json instead of the real codec. Total frames must stay below 2**24.
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

    def __post_init__(self) -> None:
        lo, hi = self.frames_per_episode
        checks = [
            (self.codec in CODECS, f"codec must be one of {CODECS}, got {self.codec!r}"),
            (self.episodes >= 1, f"episodes must be >= 1, got {self.episodes}"),
            (1 <= lo <= hi, f"frames_per_episode must be (min, max) with 1 <= min <= max, got {(lo, hi)}"),
            (self.episodes * hi < 2**INDEX_BITS, f"episodes * max frames must be < 2**{INDEX_BITS}"),
            (self.fps >= 1, f"fps must be >= 1, got {self.fps}"),
            (0 <= self.cameras < 2**CAMERA_BITS, f"cameras must be in 0..{2**CAMERA_BITS - 1}, got {self.cameras}"),
            (self.width >= 64 and self.width % 16 == 0, f"width must be a multiple of 16 and >= 64, got {self.width}"),
            (self.height >= 64 and self.height % 16 == 0,
             f"height must be a multiple of 16 and >= 64, got {self.height}"),
            (self.gop >= 1, f"gop must be >= 1, got {self.gop}"),
            (self.episodes_per_file >= 1, f"episodes_per_file must be >= 1, got {self.episodes_per_file}"),
            (self.row_group_size is None or self.row_group_size >= 1,
             f"row_group_size must be None or >= 1, got {self.row_group_size}"),
            (self.state_dim >= 1 and self.action_dim >= 1, "state_dim and action_dim must be >= 1"),
            (self.tasks >= 1, f"tasks must be >= 1, got {self.tasks}"),
            (self.info_codec is None or bool(self.info_codec), "info_codec must be None or a non-empty string"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"SampleDatasetConfig: {message}")

    @property
    def video_keys(self) -> list[str]:
        """Camera feature keys, in camera order."""
        return [camera_key(c) for c in range(self.cameras)]

    def episode_lengths(self) -> np.ndarray:
        """Frames per episode, int64 [episodes], drawn uniformly from ``frames_per_episode`` with ``seed``."""
        lo, hi = self.frames_per_episode
        return np.random.default_rng(self.seed).integers(lo, hi + 1, size=self.episodes, dtype=np.int64)


def state_value(index: int | np.ndarray, dim: int) -> np.ndarray:
    """``observation.state`` of global frame ``index``: float32 [..., dim], element j = index + j/256.

    Exact in float32 for index < 2**16; ``index`` may be an int or an integer array (result [*shape, dim]).
    """
    return (np.asarray(index, dtype=np.float64)[..., None] + np.arange(dim) / 256).astype(np.float32)


def action_value(index: int | np.ndarray, dim: int) -> np.ndarray:
    """``action`` of global frame ``index``: float32 [..., dim], element j = -(index + 1 + j/256).

    Negative, so it never equals any state value; same broadcasting as ``state_value``.
    """
    return -state_value(np.asarray(index) + 1, dim)


def _code_cells(index: int, camera: int) -> np.ndarray:
    """The bool [_ROWS, _COLS] cell grid (True = white) encoding ``index`` and ``camera``."""
    if not (0 <= index < 2**INDEX_BITS and 0 <= camera < 2**CAMERA_BITS):
        raise ValueError(f"frame_code needs 0 <= index < 2**{INDEX_BITS} and 0 <= camera < 2**{CAMERA_BITS}")
    payload = index | camera << INDEX_BITS
    bits = [bool(payload >> b & 1) for b in range(INDEX_BITS + CAMERA_BITS)]
    cells = np.zeros(_ROWS * _COLS, dtype=bool)
    cells[_DATA_CELLS] = bits + [sum(bits) % 2 == 1]  # even parity over all data cells
    cells[list(_MARKERS)] = list(_MARKERS.values())
    return cells.reshape(_ROWS, _COLS)


def frame_code(index: int, camera: int, *, width: int = 128, height: int = 96) -> np.ndarray:
    """Draw the frame of camera ``camera`` for global frame ``index``: uint8 [height, width, 3] RGB.

    A 4x8 grid of black (0) / white (255) cells covering the whole frame: fixed corner markers, the 24
    index bits and 3 camera bits (LSB first, row-major) and an even-parity cell. Raises ``ValueError``
    if index or camera is out of range.
    """
    cells = _code_cells(index, camera)
    rows = np.arange(height) * _ROWS // height
    cols = np.arange(width) * _COLS // width
    gray = np.where(cells[rows[:, None], cols[None, :]], 255, 0).astype(np.uint8)
    return np.repeat(gray[:, :, None], 3, axis=2)


def read_frame_code(frame: Any) -> tuple[int, int]:
    """Recover ``(index, camera)`` from a decoded ``frame_code`` frame.

    ``frame``: torch tensor or numpy array, [C, H, W] or [H, W, C] (C = 1 or 3, detected by shape),
    uint8 in 0-255 or float in [0, 1]. The central half of each cell is averaged and thresholded at 128.
    Raises ``ValueError`` if the shape is wrong, a cell is ambiguous (mean within 40 of 128), or the
    markers or parity do not match.
    """
    if hasattr(frame, "detach"):  # torch.Tensor, without importing torch
        frame = frame.detach().cpu().numpy()
    a = np.asarray(frame)
    if a.ndim != 3 or (a.shape[-1] not in (1, 3) and a.shape[0] not in (1, 3)):
        raise ValueError(f"read_frame_code expects [C,H,W] or [H,W,C] with C in (1, 3), got shape {a.shape}")
    if a.shape[-1] not in (1, 3):
        a = a.transpose(1, 2, 0)
    luma = a.astype(np.float64).mean(axis=2) * (255.0 if np.issubdtype(a.dtype, np.floating) else 1.0)
    height, width = luma.shape
    means = np.empty((_ROWS, _COLS))
    for r in range(_ROWS):
        y0, y1 = -(-r * height // _ROWS), -(-(r + 1) * height // _ROWS)
        for c in range(_COLS):
            x0, x1 = -(-c * width // _COLS), -(-(c + 1) * width // _COLS)
            dy, dx = (y1 - y0) // 4, (x1 - x0) // 4
            means[r, c] = luma[y0 + dy:y1 - dy, x0 + dx:x1 - dx].mean()
    if np.abs(means - 128).min() < _MARGIN:
        raise ValueError(f"unreadable frame code: ambiguous cell means {np.round(means).astype(int).tolist()}")
    cells = (means > 128).ravel()
    if any(cells[k] != v for k, v in _MARKERS.items()) or cells[_DATA_CELLS].sum() % 2:
        raise ValueError("unreadable frame code: marker or parity mismatch")
    payload = sum(1 << b for b, on in enumerate(cells[_DATA_CELLS][:-1]) if on)
    return payload & (2**INDEX_BITS - 1), payload >> INDEX_BITS


class _Encoder:
    """One ffmpeg process encoding raw rgb24 frames written to its stdin into ``path``."""

    def __init__(self, ffmpeg: str, path: pathlib.Path, cfg: SampleDatasetConfig) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path, self._log = path, tempfile.TemporaryFile()
        cmd = [ffmpeg, "-hide_banner", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
               "-s", f"{cfg.width}x{cfg.height}", "-r", str(cfg.fps), "-i", "-", "-an", *_CODEC_ARGS[cfg.codec],
               "-g", str(cfg.gop), "-pix_fmt", "yuv420p", "-y", str(path)]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self._log)

    def write(self, frame: np.ndarray) -> None:
        try:
            self._proc.stdin.write(frame.tobytes())
        except BrokenPipeError:
            self.finish()
            raise RuntimeError(f"ffmpeg exited early while encoding {self._path}") from None

    def finish(self) -> None:
        """Close stdin, wait, and raise ``RuntimeError`` with ffmpeg's stderr tail on a non-zero exit."""
        with contextlib.suppress(BrokenPipeError):
            self._proc.stdin.close()
        code = self._proc.wait()
        self._log.seek(0)
        tail = self._log.read()[-3000:].decode(errors="replace")
        self._log.close()
        if code != 0:
            raise RuntimeError(f"ffmpeg failed (exit {code}) encoding {self._path}:\n{tail}")

    def kill(self) -> None:
        self._proc.kill()
        self._proc.wait()
        self._log.close()


def _write_parquet(table: pa.Table, path: pathlib.Path, row_group_size: int | None = None) -> None:
    """Write ``table`` with pandas schema metadata, as LeRobot's own files carry."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(table.to_pandas(), schema=table.schema, preserve_index=False)
    pq.write_table(table, path, row_group_size=row_group_size or max(table.num_rows, 1))


def _list_column(values: np.ndarray) -> pa.ListArray:
    """[N, D] float32 -> arrow list<float32> column of N lists."""
    offsets = pa.array(np.arange(0, values.size + 1, values.shape[1], dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(values.ravel()))


def _stats(values: np.ndarray) -> dict[str, list]:
    """LeRobot per-feature stats of [N] or [N, D] values (min/max keep the dtype)."""
    v = values.reshape(len(values), -1)
    as_float = v.astype(np.float64)
    return {"min": v.min(0).tolist(), "max": v.max(0).tolist(), "mean": as_float.mean(0).tolist(),
            "std": as_float.std(0).tolist(), "count": [len(v)]}


def _write_dataset(dst: pathlib.Path, cfg: SampleDatasetConfig, ffmpeg: str | None,
                   progress: Callable[[int, int], None] | None) -> None:
    lengths = cfg.episode_lengths()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    index = np.arange(starts[-1], dtype=np.int64)
    episode = np.repeat(np.arange(cfg.episodes, dtype=np.int64), lengths)
    frame_index = index - starts[episode]
    columns = {"observation.state": state_value(index, cfg.state_dim),
               "action": action_value(index, cfg.action_dim),
               "timestamp": (frame_index / cfg.fps).astype(np.float32), "frame_index": frame_index,
               "episode_index": episode, "index": index, "task_index": episode % cfg.tasks}
    white_pixels = [0] * cfg.cameras  # frame_code frames are pure black/white gray
    ep_rows: list[dict[str, Any]] = []
    for file_no, first in enumerate(range(0, cfg.episodes, cfg.episodes_per_file)):
        eps = range(first, min(first + cfg.episodes_per_file, cfg.episodes))
        chunk, file = divmod(file_no, CHUNKS_SIZE)
        rel = f"chunk-{chunk:03d}/file-{file:03d}"
        rows = slice(starts[eps[0]], starts[eps[-1] + 1])
        table = pa.table({name: _list_column(col[rows]) if col.ndim == 2 else col[rows]
                          for name, col in columns.items()})
        _write_parquet(table, dst / "data" / f"{rel}.parquet", cfg.row_group_size)
        encoders = [_Encoder(ffmpeg, dst / "videos" / key / f"{rel}.mp4", cfg) for key in cfg.video_keys]
        try:
            for e in eps:
                for i in range(starts[e], starts[e + 1]):
                    for cam, encoder in enumerate(encoders):
                        frame = frame_code(int(i), cam, width=cfg.width, height=cfg.height)
                        encoder.write(frame)
                        white_pixels[cam] += np.count_nonzero(frame[:, :, 0])
                from_ts = float(starts[e] - starts[eps[0]]) / cfg.fps
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
            for encoder in encoders:
                encoder.finish()
        except BaseException:
            for encoder in encoders:
                encoder.kill()
            raise

    ep_schema = pa.schema([(name, pa.list_(pa.string()) if name == "tasks" else
                            pa.float64() if name.endswith("_timestamp") else pa.int64()) for name in ep_rows[0]])
    _write_parquet(pa.Table.from_pylist(ep_rows, schema=ep_schema), dst / "meta/episodes/chunk-000/file-000.parquet")
    tasks = pd.DataFrame({"task_index": np.arange(cfg.tasks, dtype=np.int64)},
                         index=pd.Index([task_string(t) for t in range(cfg.tasks)], dtype=object))
    tasks.to_parquet(dst / "meta" / "tasks.parquet")

    scalar = {"dtype": "int64", "shape": [1], "names": None}
    video_info = {"video.height": cfg.height, "video.width": cfg.width, "video.codec": cfg.info_codec or cfg.codec,
                  "video.pix_fmt": "yuv420p", "video.is_depth_map": False, "video.fps": cfg.fps,
                  "video.channels": 3, "has_audio": False}
    features = {
        "observation.state": {"dtype": "float32", "shape": [cfg.state_dim],
                              "names": [f"joint_{j}.pos" for j in range(cfg.state_dim)]},
        "action": {"dtype": "float32", "shape": [cfg.action_dim],
                   "names": [f"joint_{j}.pos" for j in range(cfg.action_dim)]},
        **{key: {"dtype": "video", "shape": [cfg.height, cfg.width, 3], "names": ["height", "width", "channels"],
                 "info": video_info} for key in cfg.video_keys},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        **{name: scalar for name in ("frame_index", "episode_index", "index", "task_index")},
    }
    info = {"codebase_version": "v3.0", "robot_type": "dl_synthetic", "total_episodes": cfg.episodes,
            "total_frames": int(starts[-1]), "total_tasks": cfg.tasks, "chunks_size": CHUNKS_SIZE,
            "data_files_size_in_mb": 100, "video_files_size_in_mb": 200, "fps": cfg.fps,
            "splits": {"train": f"0:{cfg.episodes}"},
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
            "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
            "features": features}
    (dst / "meta" / "info.json").write_text(json.dumps(info, indent=4) + "\n")

    stats = {name: _stats(col) for name, col in columns.items()}
    n_pixels = len(index) * cfg.width * cfg.height
    for key, white in zip(cfg.video_keys, white_pixels):  # pixel values in [0, 1] are 0 or 1, same in R, G, B
        mean = white / n_pixels
        channel = {"min": float(white == n_pixels), "max": float(white > 0), "mean": mean,
                   "std": (mean - mean**2) ** 0.5}
        stats[key] = {name: [[[value]]] * 3 for name, value in channel.items()} | {"count": [len(index)]}
    (dst / "meta" / "stats.json").write_text(json.dumps(stats, indent=4) + "\n")


def write_sample_dataset(root: str | os.PathLike, config: SampleDatasetConfig = SampleDatasetConfig(), *,
                         progress: Callable[[int, int], None] | None = None) -> pathlib.Path:
    """Generate a dataset described by ``config`` at ``root`` and return ``root`` as a ``Path``.

    Everything is written into a hidden sibling temp folder that is renamed onto ``root`` at the end,
    so a crash never leaves a partial dataset. ``progress(done_episodes, total_episodes)`` is called
    after each episode. Raises ``FileExistsError`` if ``root`` exists and is not an empty folder (also
    if another writer filled it first), ``RuntimeError`` if ffmpeg is missing or fails.
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
            os.rename(tmp, root)  # atomic; replaces a missing or empty directory only
        except OSError as exc:
            if root.is_dir() and any(root.iterdir()):
                raise FileExistsError(f"dataset root {root} was filled by another writer") from exc
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return root


def default_dataset_root() -> pathlib.Path:
    """Folder of the embedded default dataset: ``$DL_CACHE_DIR/datasets/default-<DATASET_TAG>``, else the
    same under ``$XDG_CACHE_HOME/dl`` or ``~/.cache/dl``."""
    cache = os.environ.get("DL_CACHE_DIR")
    if not cache:
        cache = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache") / "dl"
    return pathlib.Path(cache) / "datasets" / f"default-{DATASET_TAG}"


def ensure_default_dataset(progress: Callable[[int, int], None] | None = None) -> pathlib.Path:
    """Return ``default_dataset_root()``, generating it with ``SampleDatasetConfig()`` on first use.

    Safe when processes race: the loser of the final rename discards its copy and returns the winner's.
    Raises ``FileExistsError`` if the folder holds something that is not a dataset (no meta/info.json).
    """
    root = default_dataset_root()
    if (root / "meta" / "info.json").is_file():
        return root
    try:
        return write_sample_dataset(root, progress=progress)
    except FileExistsError:
        if (root / "meta" / "info.json").is_file():
            return root
        raise
