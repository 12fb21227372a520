"""A metadata-heavy LeRobot v3.0 dataset for `scale.py`: many short episodes of tiny frames, written in minutes
even at a million episodes.

The layout is LeRobot 0.4's: `data/chunk-CCC/file-FFF.parquet` of `episodes_per_file` episodes each, one mp4
per data file (`videos/observation.images.cam0/...`, 64x64 H.264), `meta/episodes/chunk-000/file-NNN.parquet`
(`EPISODES_PER_META_FILE` rows each, with per-episode `stats/...` columns as LeRobot writes them),
`meta/tasks.parquet`, `meta/info.json` and `meta/stats.json`. Every episode has the same length, so every
full video file holds the same frames: one is encoded and the others are hard links to it (the frames carry
`dl.testing.synthetic.frame_code` of their row in the file, not of their global index: the scale benchmark
times start-up, `dl.testing` checks values). Tabular values are those of `dl.testing.synthetic`.

    .venv/bin/python benchmarks/scale_dataset.py /tmp/scale/100k --episodes 100000
"""

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dl.testing.synthetic import SyntheticConfig, camera_key, frame_code, task_string
from dl.testing.synthetic_writer import info_json as synthetic_info

EPISODES_PER_META_FILE = 100_000
"""Rows per meta/episodes parquet file (LeRobot rolls these files over by size)."""
CHUNKS_SIZE = 1000
SIZE, FPS, STATE_DIM, TASKS = 64, 30, 6, 8


def _vectors(values: np.ndarray) -> pa.Array:
    """float32 [N, D] as list<float32> (what LeRobot's writer stores)."""
    n, d = values.shape
    return pa.ListArray.from_arrays(pa.array(np.arange(0, n * d + 1, d, dtype=np.int32)), pa.array(values.ravel()))


def _data_file(path: Path, first_episode: int, episodes: int, length: int) -> None:
    index = np.arange(first_episode * length, (first_episode + episodes) * length, dtype=np.int64)
    episode = index // length
    frame_index = index - episode * length
    state = (index[:, None] + np.arange(STATE_DIM) / 256).astype(np.float32)
    table = pa.table({"observation.state": _vectors(state), "action": _vectors(-(state + 1)),
                      "timestamp": (frame_index / FPS).astype(np.float32), "frame_index": frame_index,
                      "episode_index": episode, "index": index, "task_index": episode % TASKS})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def _video(path: Path, frames: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s",
           f"{SIZE}x{SIZE}", "-r", str(FPS), "-i", "-", "-an", "-c:v", "libx264", "-preset", "ultrafast", "-g", "30",
           "-pix_fmt", "yuv420p", "-y", str(path)]
    codes = [frame_code(i, 0, width=SIZE, height=SIZE).tobytes() for i in range(min(frames, 3000))]
    subprocess.run(cmd, input=b"".join(codes[i % len(codes)] for i in range(frames)), check=True)


def _episode_stats(values: np.ndarray, name: str) -> dict[str, pa.Array]:
    """LeRobot's per-episode `stats/NAME/{min,max,mean,std,count}` columns for episodes of equal length
    (`values`: [episodes, length, D])."""
    n, length, _ = values.shape
    out = {f"stats/{name}/{k}": _vectors(getattr(values, k)(axis=1).astype(np.float32)) for k in ("min", "max", "mean")}
    out[f"stats/{name}/std"] = _vectors(values.std(axis=1).astype(np.float32))
    out[f"stats/{name}/count"] = pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)),
                                                          pa.array(np.full(n, length, dtype=np.int64)))
    return out


def _meta_file(path: Path, first: int, episodes: int, length: int, per_file: int) -> None:
    e = np.arange(first, first + episodes, dtype=np.int64)
    chunk, file = np.divmod(e // per_file, CHUNKS_SIZE)
    from_ts = ((e % per_file) * length / FPS).astype(np.float64)
    key = camera_key(0)
    tasks = pa.array([[task_string(t)] for t in range(TASKS)], pa.list_(pa.string())).take(pa.array(e % TASKS))
    columns = {"episode_index": e, "tasks": tasks, "length": np.full(episodes, length, dtype=np.int64),
               "data/chunk_index": chunk, "data/file_index": file,
               "dataset_from_index": e * length, "dataset_to_index": (e + 1) * length,
               f"videos/{key}/chunk_index": chunk, f"videos/{key}/file_index": file,
               f"videos/{key}/from_timestamp": from_ts, f"videos/{key}/to_timestamp": from_ts + length / FPS,
               "meta/episodes/chunk_index": np.zeros(episodes, dtype=np.int64),
               "meta/episodes/file_index": np.full(episodes, first // EPISODES_PER_META_FILE, dtype=np.int64)}
    state = (e[:, None, None] * length + np.arange(length)[None, :, None] + np.arange(STATE_DIM) / 256)
    columns |= _episode_stats(state, "observation.state") | _episode_stats(-(state + 1), "action")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


def write_scale_dataset(root: Path, episodes: int, length: int = 10, per_file: int = 1000) -> Path:
    """Write the dataset (see the module docstring) into `root`, which must not exist; returns `root`."""
    root = Path(root)
    tmp = root.with_name(f".{root.name}.tmp")
    if root.exists():
        raise FileExistsError(f"{root} exists")
    config = SyntheticConfig(episodes=episodes, frames_per_episode=(length, length), fps=FPS, cameras=1, width=SIZE,
                             height=SIZE, codec="h264", episodes_per_file=per_file, state_dim=STATE_DIM,
                             action_dim=STATE_DIM, tasks=TASKS)
    encoded: dict[int, Path] = {}
    for file_no, first in enumerate(range(0, episodes, per_file)):
        count = min(per_file, episodes - first)
        chunk, file = divmod(file_no, CHUNKS_SIZE)
        rel = f"chunk-{chunk:03d}/file-{file:03d}"
        _data_file(tmp / "data" / f"{rel}.parquet", first, count, length)
        video = tmp / "videos" / camera_key(0) / f"{rel}.mp4"
        if count not in encoded:
            _video(video, count * length)
            encoded[count] = video
        else:
            video.parent.mkdir(parents=True, exist_ok=True)
            os.link(encoded[count], video)
    for first in range(0, episodes, EPISODES_PER_META_FILE):
        count = min(EPISODES_PER_META_FILE, episodes - first)
        name = f"file-{first // EPISODES_PER_META_FILE:03d}.parquet"
        _meta_file(tmp / "meta" / "episodes" / "chunk-000" / name, first, count, length, per_file)
    tasks = pd.DataFrame({"task_index": np.arange(TASKS, dtype=np.int64)},
                         index=pd.Index([task_string(t) for t in range(TASKS)], dtype=object))
    tasks.to_parquet(tmp / "meta" / "tasks.parquet")
    (tmp / "meta" / "info.json").write_text(json.dumps(synthetic_info(config, episodes * length), indent=4))
    (tmp / "meta" / "stats.json").write_text(json.dumps(_stats(episodes * length, length)))
    os.rename(tmp, root)
    return root


def _stats(frames: int, length: int) -> dict:
    """meta/stats.json: LeRobot's layout, the values of a dataset of `frames` frames (closed forms)."""
    mean_index = (frames - 1) / 2
    spread = float(np.sqrt((frames ** 2 - 1) / 12))
    vector = {"min": [j / 256 for j in range(STATE_DIM)], "max": [frames - 1 + j / 256 for j in range(STATE_DIM)],
              "mean": [mean_index + j / 256 for j in range(STATE_DIM)], "std": [spread] * STATE_DIM, "count": [frames]}
    scalar = {"min": [0], "max": [frames - 1], "mean": [mean_index], "std": [spread], "count": [frames]}
    pixel = {k: [[[v]]] * 3 for k, v in (("min", 0.0), ("max", 1.0), ("mean", 0.5), ("std", 0.5))}
    action = {"min": [-(v + 1) for v in vector["max"]], "max": [-(v + 1) for v in vector["min"]],
              "mean": [-(v + 1) for v in vector["mean"]], "std": vector["std"], "count": [frames]}
    return {"observation.state": vector, "action": action,
            "timestamp": {"min": [0.0], "max": [(length - 1) / FPS], "mean": [(length - 1) / 2 / FPS],
                          "std": [0.0], "count": [frames]},
            **{k: scalar for k in ("frame_index", "episode_index", "index", "task_index")},
            camera_key(0): {**pixel, "count": [frames]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--episodes", type=int, required=True)
    parser.add_argument("--length", type=int, default=10, help="frames per episode [10]")
    parser.add_argument("--per-file", type=int, default=1000, help="episodes per data and video file [1000]")
    args = parser.parse_args()
    t0 = time.perf_counter()
    write_scale_dataset(args.root, args.episodes, args.length, args.per_file)
    print(f"{args.root}: {args.episodes} episodes in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
