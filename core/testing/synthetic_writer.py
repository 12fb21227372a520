"""The files of a synthetic dataset (`dl.testing.synthetic.SyntheticConfig`): data parquet, mp4s encoded by FFmpeg,
PNG/JPEG images embedded in the data parquet, and meta/ (episodes, tasks, subtasks, info.json, stats.json), each
written the way LeRobot's own tools write it."""

from __future__ import annotations

import contextlib
import io
import json
import pathlib
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .synthetic_spec import (
    SyntheticConfig,
    _code_cells,
    _frame_code_stats,
    action_value,
    camera_key,
    codec_args,
    depth_code,
    frame_code,
    language_messages,
    state_value,
    task_string,
    timestamps,
)
from .synthetic_timing import input_args, write_camera_file

CHUNKS_SIZE = 1000
SAY_TOOL = {"type": "function", "function": {"name": "say", "description": "Speak a short utterance to the user.",
                                             "parameters": {"type": "object", "required": ["text"],
                                                            "properties": {"text": {"type": "string"}}}}}
"""The tool schema LeRobot 0.6.1's annotation executor lists in info.json's `tools` (`SAY_TOOL_SCHEMA`, shortened)."""
DEPTH_KEY = "observation.images.depth"
"""The depth camera's key (`SyntheticConfig.depth_camera`)."""


def _ffmpeg(ffmpeg: str, path: pathlib.Path, args: list[str], frames) -> None:
    """Pipe raw `frames` (bytes each) to one ffmpeg process writing `path`. Raises `RuntimeError` with ffmpeg's
    stderr tail if it fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([ffmpeg, "-hide_banner", "-loglevel", "error", *args, "-y", str(path)],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log)
        try:
            for frame in frames:
                proc.stdin.write(frame)
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


def _encode(ffmpeg: str, path: pathlib.Path, cfg: SyntheticConfig, camera: int, indices) -> None:
    """Encode camera `camera`'s `frame_code` frames for global `indices` into the mp4 `path` (raw rgb24 piped), timed
    as `dl.testing.synthetic_timing.input_args` says."""
    rate, timing = input_args(cfg)
    args = ["-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{cfg.width}x{cfg.height}", *rate, "-i", "-",
            "-an", *codec_args(cfg), "-g", str(cfg.gop), "-pix_fmt", "yuv420p", *timing]
    frames = (frame_code(i, camera, width=cfg.width, height=cfg.height, texture=cfg.texture) for i in indices)
    _ffmpeg(ffmpeg, path, args, (frame.tobytes() for frame in frames))


def _encode_camera(ffmpeg: str, cfg: SyntheticConfig, camera: int, path: pathlib.Path, indices) -> None:
    _encode(ffmpeg, path, cfg, camera, indices)


def _encode_depth(ffmpeg: str, path: pathlib.Path, cfg: SyntheticConfig, indices: range) -> None:
    """A depth camera as LeRobot 0.6.1's writer encodes one (its `DepthEncoderConfig`: HEVC, gray12le,
    `x265-params lossless=1`, x265's default open GOPs): the 12-bit codes `depth_code(i)` of each frame."""
    args = ["-f", "rawvideo", "-pix_fmt", "gray12le", "-s", f"{cfg.width}x{cfg.height}", "-r", str(cfg.fps), "-i",
            "-", "-an", "-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "lossless=1:log-level=error",
            "-tag:v", "hvc1", "-g", str(cfg.gop), "-pix_fmt", "gray12le"]
    _ffmpeg(ffmpeg, path, args, (depth_code(i, cfg.width, cfg.height).astype("<u2").tobytes() for i in indices))


def _image(cfg: SyntheticConfig, index: int, camera: int) -> bytes:
    """Camera `camera`'s frame of global `index` as a PNG or JPEG file (quality 95), as LeRobot's image writer."""
    from PIL import Image

    out = io.BytesIO()
    image = Image.fromarray(frame_code(index, camera, width=cfg.width, height=cfg.height, texture=cfg.texture))
    image.save(out, format=cfg.image_format.upper(), **({"quality": 95} if cfg.image_format == "jpeg" else {}))
    return out.getvalue()


def _write_parquet(table: pa.Table, path: pathlib.Path, row_group_size: int | None = None) -> None:
    """Write `table` with the pandas schema metadata LeRobot's own files carry."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(table.to_pandas(), schema=table.schema, preserve_index=False)
    pq.write_table(table, path, row_group_size=row_group_size or max(table.num_rows, 1))


def _stats(values: np.ndarray) -> dict[str, list]:
    """LeRobot stats of [N] or [N, D] values; min/max keep the dtype."""
    v = values.reshape(len(values), -1)
    return {"min": v.min(0).tolist(), "max": v.max(0).tolist(), "mean": v.mean(0, dtype=np.float64).tolist(),
            "std": v.astype(np.float64).std(0).tolist(), "count": [len(v)]}


def info_json(cfg: SyntheticConfig, total_frames: int) -> dict[str, Any]:
    """The `meta/info.json` document."""
    video = {"video.height": cfg.height, "video.width": cfg.width, "video.codec": cfg.info_codec or cfg.codec,
             "video.pix_fmt": "yuv420p", "video.is_depth_map": False, "video.fps": cfg.fps, "video.channels": 3,
             "has_audio": False}
    cameras = {}
    for key in cfg.camera_keys:
        cameras[key] = {"dtype": "image" if key in cfg.image_keys else "video", "shape": [cfg.height, cfg.width, 3],
                        "names": ["height", "width", "channels"]}
        if key in cfg.video_keys:
            cameras[key]["info"] = video
    if cfg.depth_camera:
        cameras[DEPTH_KEY] = {"dtype": "video", "shape": [cfg.height, cfg.width, 1],
                              "names": ["height", "width", "channels"],
                              "info": {**{k: v for k, v in video.items() if k != "video.is_depth_map"},
                                       "video.codec": "hevc", "video.pix_fmt": "gray12le",
                                       "video.channels": 1, "video.depth_min": 0.01, "video.depth_max": 10.0,
                                       "video.shift": 3.5, "video.use_log": True, "is_depth_map": True,
                                       "depth_unit": "mm"}}
    features = {
        "observation.state": {"dtype": "float32", "shape": [cfg.state_dim],
                              "names": [f"joint_{j}.pos" for j in range(cfg.state_dim)]},
        "action": {"dtype": "float32", "shape": [cfg.action_dim],
                   "names": [f"joint_{j}.pos" for j in range(cfg.action_dim)]},
        **cameras,
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        **{name: {"dtype": "int64", "shape": [1], "names": None}
           for name in ("frame_index", "episode_index", "index", "task_index")},
    }
    if cfg.subtasks:
        features["subtask_index"] = {"dtype": "int64", "shape": [1], "names": None}
    if cfg.language_columns:
        features |= {key: {"dtype": "language", "shape": [1], "names": None}
                     for key in ("language_persistent", "language_events")}
    episodes = cfg.info_total_episodes or cfg.episodes
    frames = total_frames * episodes // cfg.episodes
    tools = {"tools": [SAY_TOOL]} if cfg.language_columns else {}
    return {**tools, "codebase_version": "v3.0", "robot_type": "dl_synthetic", "total_episodes": episodes,
            "total_frames": frames, "total_tasks": cfg.tasks, "chunks_size": CHUNKS_SIZE,
            "data_files_size_in_mb": 100, "video_files_size_in_mb": 200, "fps": cfg.fps,
            "splits": {"train": f"0:{episodes}"},
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
            # LeRobotDataset.create(use_videos=False) writes no video_path
            "video_path": None if cfg.image_cameras and not (cfg.video_keys or cfg.depth_camera) else
            "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
            "features": features}


def _language(frame_index: np.ndarray, episode: np.ndarray, cfg: SyntheticConfig) -> dict[str, pa.Array]:
    """LeRobot 0.6's annotation columns (`language_messages`), typed by inference as its writer types them."""
    messages = [language_messages(cfg, int(e), int(f)) for f, e in zip(frame_index, episode, strict=True)]
    return {"language_persistent": pa.array([p for p, _ in messages]),
            "language_events": pa.array([e for _, e in messages])}


def _columns(cfg: SyntheticConfig, lo: int, hi: int, columns: dict[str, np.ndarray]) -> pa.Table:
    """The data table of global rows [lo, hi): numeric columns, then the image cameras and annotation columns."""
    out: dict[str, pa.Array] = {}
    for name, col in columns.items():
        out[name] = pa.array(list(col[lo:hi]), pa.list_(pa.float32())) if col.ndim == 2 else pa.array(col[lo:hi])
    for camera in cfg.image_cameras:
        images = [_image(cfg, i, camera) for i in range(lo, hi)]
        paths = [f"frame-{int(f):06d}.{cfg.image_format}" for f in columns["frame_index"][lo:hi]]
        out[camera_key(camera)] = pa.StructArray.from_arrays([pa.array(images, pa.binary()), pa.array(paths)],
                                                             names=["bytes", "path"])
    if cfg.language_columns:
        out |= _language(columns["frame_index"][lo:hi], columns["episode_index"][lo:hi], cfg)
    return pa.table(out)


def write_dataset(dst: pathlib.Path, cfg: SyntheticConfig, ffmpeg: str | None,
                  progress: Callable[[int, int], None] | None) -> None:
    """Write the whole dataset described by `cfg` into the existing empty folder `dst`."""
    lengths = cfg.episode_lengths()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    index = np.arange(starts[-1], dtype=np.int64)
    episode = np.repeat(np.arange(cfg.episodes, dtype=np.int64), lengths)
    frame_index = index - starts[episode]
    columns = {"observation.state": state_value(index, cfg.state_dim),
               "action": action_value(index, cfg.action_dim),
               "timestamp": timestamps(cfg), "frame_index": frame_index,
               "episode_index": episode, "index": index, "task_index": episode % cfg.tasks}
    if cfg.subtasks:
        columns["subtask_index"] = (frame_index // 10) % cfg.subtasks
    videos = [(camera_key(c), c) for c in range(cfg.cameras) if c not in cfg.image_cameras]
    videos += [(DEPTH_KEY, -1)] if cfg.depth_camera else []
    ep_rows: list[dict[str, Any]] = []
    for file_no, first in enumerate(range(0, cfg.episodes, cfg.episodes_per_file)):
        eps = range(first, min(first + cfg.episodes_per_file, cfg.episodes))
        chunk, file = divmod(file_no, CHUNKS_SIZE)
        rel = f"chunk-{chunk:03d}/file-{file:03d}"
        lo, hi = int(starts[eps[0]]), int(starts[eps[-1] + 1])
        _write_parquet(_columns(cfg, lo, hi, columns), dst / "data" / f"{rel}.parquet", cfg.row_group_size)
        spans = [range(int(starts[e]), int(starts[e + 1])) for e in eps]
        with ThreadPoolExecutor(max(len(videos), 1)) as pool:  # one ffmpeg per camera, in parallel
            jobs = {key: pool.submit(_encode_depth, ffmpeg, dst / "videos" / key / f"{rel}.mp4", cfg, range(lo, hi))
                    if cam < 0 else pool.submit(write_camera_file, partial(_encode_camera, ffmpeg, cfg, cam),
                                                ffmpeg, dst / "videos" / key / f"{rel}.mp4", cfg, spans)
                    for key, cam in videos}
            times = {key: job.result() for key, job in jobs.items()}
        for e in eps:
            from_ts = float(starts[e] - lo) / cfg.fps
            # the converter records the first episode of each new data file with the previous file's indices
            named = divmod(file_no - 1, CHUNKS_SIZE) if cfg.converter_boundaries and e == first and file_no else (
                chunk, file)
            row = {"episode_index": e, "tasks": [task_string(e % cfg.tasks)], "length": int(lengths[e]),
                   "data/chunk_index": named[0], "data/file_index": named[1],
                   "dataset_from_index": int(starts[e]), "dataset_to_index": int(starts[e + 1])}
            for key, _ in videos:
                span = times[key][e - first] if times[key] is not None else (from_ts,
                                                                               from_ts + float(lengths[e]) / cfg.fps)
                row |= {f"videos/{key}/chunk_index": chunk, f"videos/{key}/file_index": file,
                        f"videos/{key}/from_timestamp": span[0], f"videos/{key}/to_timestamp": span[1]}
            ep_rows.append(row | {"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
            if progress is not None:
                progress(e + 1, cfg.episodes)

    ep_schema = pa.schema([(name, pa.list_(pa.string()) if name == "tasks" else
                            pa.float64() if name.endswith("_timestamp") else pa.int64()) for name in ep_rows[0]])
    _write_parquet(pa.Table.from_pylist(ep_rows, schema=ep_schema), dst / "meta/episodes/chunk-000/file-000.parquet")
    _task_table(cfg.tasks, task_string, "task_index").to_parquet(dst / "meta" / "tasks.parquet")
    if cfg.subtasks:
        _task_table(cfg.subtasks, lambda s: f"step {s}", "subtask_index").to_parquet(dst / "meta" / "subtasks.parquet")
    (dst / "meta" / "info.json").write_text(json.dumps(info_json(cfg, len(index)), indent=4) + "\n")
    stats = {name: _stats(col) for name, col in columns.items()}
    for cam, key in enumerate(cfg.camera_keys):  # equal R, G, B; every frame has both black and white cells
        white = float(np.mean([_code_cells(int(i), cam).mean() for i in index]))  # cells have equal areas
        channel = _frame_code_stats(white, cfg.texture)
        stats[key] = {name: [[[value]]] * 3 for name, value in channel.items()} | {"count": [len(index)]}
    (dst / "meta" / "stats.json").write_text(json.dumps(stats, indent=4) + "\n")


def _task_table(count: int, text: Callable[[int], str], column: str) -> pd.DataFrame:
    """A tasks (or subtasks) table as LeRobot writes it: the text as the pandas index, the index as a column."""
    return pd.DataFrame({column: np.arange(count, dtype=np.int64)},
                        index=pd.Index([text(t) for t in range(count)], dtype=object))
