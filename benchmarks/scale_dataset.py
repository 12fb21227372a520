"""A metadata-heavy LeRobot v3.0 dataset for `scale.py`: many short episodes of tiny frames, written in minutes
even at a million episodes, once, into dl's cache folder (`scale_dataset`).

The layout is LeRobot 0.6's: `data/chunk-CCC/file-FFF.parquet` of `per_file` episodes each, one mp4 per data
file (`videos/observation.images.cam0/...`, 64x64 H.264), `meta/episodes/chunk-CCC/file-FFF.parquet`
(`meta_per_file` rows each, with per-episode `stats/...` columns as LeRobot writes them; LeRobot's writer rolls
these files over at `data_files_size_in_mb` and moves to the next chunk after `chunks_size` files, this one after
a number of rows, named the same way), `meta/tasks.parquet`, `meta/info.json` and `meta/stats.json`.

Episode lengths vary from 6 to 14 frames (`episode_lengths`: pairs of lengths 10 - d and 10 + d, shuffled within
each file), so every full data file holds `10 * per_file` frames and every full video file the same frames: one is
encoded and the others are hard links to it (the frames carry `dl.testing.synthetic.frame_code` of their row in
the file, not of their global index: the scale benchmark times start-up, `dl.testing` checks values). Each
episode's `from_timestamp` / `to_timestamp` are read from the encoded file's MP4 index (`dl.kits.video_indexes`), the
times dl's checks read. Tabular values are those of `dl.testing.synthetic`: `observation.state[j]` of row `i` is
`i + j / 256`, `action` is `-(state + 1)`.

    nice -n 19 .venv/bin/python benchmarks/scale_dataset.py --episodes 100000          # into dl's cache
    nice -n 19 .venv/bin/python benchmarks/scale_dataset.py --episodes 1000 --root /tmp/scale-1k
"""

import argparse
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dl.kits.paths import cache_dir
from dl.kits.video_indexes import VideoIndexes
from dl.testing.renamed import renamed_dataset
from dl.testing.synthetic import SyntheticConfig, camera_key, frame_code, task_string
from dl.testing.synthetic_writer import info_json as synthetic_info

META_PER_FILE = 100_000
"""Rows per meta/episodes parquet file (LeRobot rolls these files over by size: 100 MB by default)."""
CHUNKS_SIZE = 1000
"""Files per chunk folder (LeRobot's `DEFAULT_CHUNK_SIZE`)."""
SIZE, FPS, STATE_DIM, TASKS = 64, 30, 6, 8
MEAN_LENGTH, SPREAD = 10, 4
"""Episodes are MEAN_LENGTH +- up to SPREAD frames long (6-14)."""
VERSION = 2
"""Part of the cached dataset's folder name: raised when what is written changes."""
NAMINGS = ({}, {"observation.images.cam0": "observation.images.top", "observation.state": "observation.joints"},
           {"observation.images.cam0": "observation.images.front", "action": "action.joints"})
"""How the members of `scale_mixture` name their features (`{common name: member's name}`), as different labs'
robots name them; member `i` takes naming `i % len(NAMINGS)`."""


def episode_lengths(episodes: int, per_file: int, seed: int = 0) -> np.ndarray:
    """int64 [episodes]: lengths in [MEAN_LENGTH - SPREAD, MEAN_LENGTH + SPREAD], in pairs summing to
    2 * MEAN_LENGTH, shuffled within each file of `per_file` episodes (an odd last episode is MEAN_LENGTH long):
    every full file of an even `per_file` holds `MEAN_LENGTH * per_file` frames."""
    rng = np.random.default_rng(seed)
    d = rng.integers(-SPREAD, SPREAD + 1, size=episodes // 2)
    lengths = np.full(episodes, MEAN_LENGTH, dtype=np.int64)
    lengths[:2 * len(d)] = np.stack([MEAN_LENGTH + d, MEAN_LENGTH - d], axis=1).ravel()
    for first in range(0, episodes, per_file):
        lengths[first:first + per_file] = rng.permutation(lengths[first:first + per_file])
    return lengths


def _vectors(values: np.ndarray) -> pa.Array:
    """float32 [N, D] as list<float32> (what LeRobot's writer stores)."""
    n, d = values.shape
    return pa.ListArray.from_arrays(pa.array(np.arange(0, n * d + 1, d, dtype=np.int32)),
                                    pa.array(values.astype(np.float32).ravel()))


def _chunk_file(number: int) -> tuple[int, int, str]:
    """The `number`-th file's (chunk index, file index, `chunk-CCC/file-FFF`), as LeRobot numbers them."""
    chunk, file = divmod(number, CHUNKS_SIZE)
    return chunk, file, f"chunk-{chunk:03d}/file-{file:03d}"


def _data_file(path: Path, episodes: np.ndarray, lengths: np.ndarray, first_row: int) -> None:
    rows = int(lengths.sum())
    index = np.arange(first_row, first_row + rows, dtype=np.int64)
    episode = np.repeat(episodes, lengths)
    frame_index = index - np.repeat(first_row + np.cumsum(lengths) - lengths, lengths)
    state = index[:, None] + np.arange(STATE_DIM) / 256
    table = pa.table({"observation.state": _vectors(state), "action": _vectors(-(state + 1)),
                      "timestamp": (frame_index / FPS).astype(np.float32), "frame_index": frame_index,
                      "episode_index": episode, "index": index, "task_index": episode % TASKS})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def _video(path: Path, frames: int) -> np.ndarray:
    """Encode `frames` coded frames into `path`; returns their presentation times (s, float64 [frames]) from the
    file's MP4 index."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s",
           f"{SIZE}x{SIZE}", "-r", str(FPS), "-i", "-", "-an", "-c:v", "libx264", "-preset", "ultrafast", "-g", "30",
           "-pix_fmt", "yuv420p", "-y", str(path)]
    codes = [frame_code(i, 0, width=SIZE, height=SIZE).tobytes() for i in range(min(frames, 3000))]
    subprocess.run(cmd, input=b"".join(codes[i % len(codes)] for i in range(frames)), check=True)
    with open(path, "rb") as f:
        def read(start: int, end: int) -> bytes:
            f.seek(start)
            return f.read(end - start)
        times = np.sort(VideoIndexes().get(str(path), path.stat().st_size, read, str(path)).pts_s)
    if len(times) != frames:
        raise RuntimeError(f"{path}: FFmpeg wrote {len(times)} frames, not {frames}")
    return times


def _stat_columns(name: str, low: np.ndarray, length: np.ndarray, sign: float, shift: float) -> dict[str, pa.Array]:
    """LeRobot's per-episode `stats/NAME/{min,max,mean,std,count}` columns of `sign * (row + j/256) + shift` over
    each episode's rows `[low, low + length)`, in closed form."""
    j = np.arange(STATE_DIM) / 256
    lo, hi = low[:, None] + j, (low + length - 1)[:, None] + j
    mean = (lo + hi) / 2
    std = np.broadcast_to(np.sqrt((length.astype(np.float64) ** 2 - 1) / 12)[:, None], lo.shape)
    ends = (sign * lo + shift, sign * hi + shift)
    out = {f"stats/{name}/min": _vectors(np.minimum(*ends)), f"stats/{name}/max": _vectors(np.maximum(*ends)),
           f"stats/{name}/mean": _vectors(sign * mean + shift), f"stats/{name}/std": _vectors(std)}
    out[f"stats/{name}/count"] = pa.ListArray.from_arrays(pa.array(np.arange(len(low) + 1, dtype=np.int32)),
                                                          pa.array(length))
    return out


def _meta_file(path: Path, columns: dict[str, np.ndarray], at: slice, number: int) -> None:
    e, length, start = columns["episode_index"][at], columns["length"][at], columns["dataset_from_index"][at]
    chunk, file, _ = _chunk_file(number)
    tasks = pa.array([[task_string(t)] for t in range(TASKS)], pa.list_(pa.string())).take(pa.array(e % TASKS))
    table = {"episode_index": e, "tasks": tasks, "length": length,
             **{k: v[at] for k, v in columns.items() if k not in ("episode_index", "length")},
             "meta/episodes/chunk_index": np.full(len(e), chunk, dtype=np.int64),
             "meta/episodes/file_index": np.full(len(e), file, dtype=np.int64)}
    table |= _stat_columns("observation.state", start, length, 1.0, 0.0)
    table |= _stat_columns("action", start, length, -1.0, -1.0)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(table), path)


def write_scale_dataset(root: Path, episodes: int, per_file: int = 1000, meta_per_file: int = META_PER_FILE) -> Path:
    """Write the dataset (see the module docstring) into `root`, which must not exist; returns `root`.

    Raises:
        FileExistsError: `root` exists.
        ValueError: `episodes`, `per_file` or `meta_per_file` below 1, or `per_file` odd (full files would then
            differ in frames and could not share one encoded video).
    """
    root = Path(root)
    if min(episodes, per_file, meta_per_file) < 1 or per_file % 2:
        raise ValueError(f"episodes ({episodes}), meta_per_file ({meta_per_file}) must be >= 1 and per_file "
                         f"({per_file}) a positive even number")
    if root.exists():
        raise FileExistsError(f"{root} exists")
    tmp = root.with_name(f".{root.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    lengths = episode_lengths(episodes, per_file)
    to_index = np.cumsum(lengths)
    e = np.arange(episodes, dtype=np.int64)
    key = camera_key(0)
    columns = {"episode_index": e, "length": lengths, "dataset_from_index": to_index - lengths,
               "dataset_to_index": to_index}
    for name in ("data", f"videos/{key}"):
        columns[f"{name}/chunk_index"], columns[f"{name}/file_index"] = np.divmod(e // per_file, CHUNKS_SIZE)
    from_ts, to_ts = np.zeros(episodes), np.zeros(episodes)
    encoded: dict[int, tuple[Path, np.ndarray]] = {}
    for number, first in enumerate(range(0, episodes, per_file)):
        at = slice(first, min(first + per_file, episodes))
        _, _, rel = _chunk_file(number)
        first_row = int(to_index[first] - lengths[first])
        _data_file(tmp / "data" / f"{rel}.parquet", e[at], lengths[at], first_row)
        video, frames = tmp / "videos" / key / f"{rel}.mp4", int(lengths[at].sum())
        if frames not in encoded:
            encoded[frames] = video, _video(video, frames)
        else:
            video.parent.mkdir(parents=True, exist_ok=True)
            os.link(encoded[frames][0], video)
        times = encoded[frames][1]
        starts = np.cumsum(lengths[at]) - lengths[at]
        ends = starts + lengths[at]
        from_ts[at] = times[starts]
        to_ts[at] = np.append(times, times[-1] + 1 / FPS)[ends]
    columns[f"videos/{key}/from_timestamp"], columns[f"videos/{key}/to_timestamp"] = from_ts, to_ts
    for number, first in enumerate(range(0, episodes, meta_per_file)):
        _meta_file(tmp / "meta" / "episodes" / f"{_chunk_file(number)[2]}.parquet", columns,
                   slice(first, first + meta_per_file), number)
    tasks = pd.DataFrame({"task_index": np.arange(TASKS, dtype=np.int64)},
                         index=pd.Index([task_string(t) for t in range(TASKS)], dtype=object))
    tasks.to_parquet(tmp / "meta" / "tasks.parquet")
    config = SyntheticConfig(episodes=episodes, frames_per_episode=(MEAN_LENGTH - SPREAD, MEAN_LENGTH + SPREAD),
                             fps=FPS, cameras=1, width=SIZE, height=SIZE, codec="h264", episodes_per_file=per_file,
                             state_dim=STATE_DIM, action_dim=STATE_DIM, tasks=TASKS)
    (tmp / "meta" / "info.json").write_text(json.dumps(synthetic_info(config, int(to_index[-1])), indent=4))
    (tmp / "meta" / "stats.json").write_text(json.dumps(_stats(lengths)))
    os.rename(tmp, root)
    return root


def scale_dataset(episodes: int, per_file: int = 1000, meta_per_file: int = META_PER_FILE) -> Path:
    """The dataset of `episodes` episodes in dl's cache folder (`scale/`), written now unless it is there already
    (written under a temporary name and renamed: an interrupted write leaves nothing that looks finished)."""
    root = cache_dir("scale") / f"v{VERSION}-{episodes}-per{per_file}-meta{meta_per_file}"
    return root if root.exists() else write_scale_dataset(root, episodes, per_file, meta_per_file)


def scale_mixture(members: int, step: int = 100) -> list[dict]:
    """`members` datasets of different sizes (member `i`: `step * (i + 1)` episodes, 200 per file), their features
    named as `NAMINGS` says, each written once into dl's cache folder; as `[{"root": folder, "rename": {member's
    name: common name}}]`, what `dl.make_mixture(..., rename=[m["rename"] ...])` takes to serve them under one set
    of names.

    Raises:
        ValueError: `members` or `step` below 1.
    """
    if members < 1 or step < 1:
        raise ValueError(f"members ({members}) and step ({step}) must be >= 1")
    out = []
    for i in range(members):
        naming = NAMINGS[i % len(NAMINGS)]
        plain = scale_dataset(step * (i + 1), per_file=200)
        root = plain.with_name(f"{plain.name}-naming{i % len(NAMINGS)}") if naming else plain
        if not root.exists():
            tmp = root.with_name(f".{root.name}.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            os.rename(renamed_dataset(plain, tmp, naming), root)
        out.append({"root": str(root), "rename": {member: common for common, member in naming.items()}})
    return out


def _scalar(values: np.ndarray) -> dict:
    return {"min": [values.min().item()], "max": [values.max().item()], "mean": [float(values.mean())],
            "std": [float(values.std())], "count": [len(values)]}


def _stats(lengths: np.ndarray) -> dict:
    """meta/stats.json in LeRobot's layout: the values of the dataset of episodes `lengths` long."""
    frames = int(lengths.sum())
    episode = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    frame_index = np.arange(frames, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    index = _scalar(np.arange(frames, dtype=np.int64))
    j = [k / 256 for k in range(STATE_DIM)]
    vector = {"min": j, "max": [frames - 1 + v for v in j], "mean": [index["mean"][0] + v for v in j],
              "std": index["std"] * STATE_DIM, "count": [frames]}
    action = {"min": [-(v + 1) for v in vector["max"]], "max": [-(v + 1) for v in vector["min"]],
              "mean": [-(v + 1) for v in vector["mean"]], "std": vector["std"], "count": [frames]}
    pixel = {k: [[[v]]] * 3 for k, v in (("min", 0.0), ("max", 1.0), ("mean", 0.5), ("std", 0.5))}
    return {"observation.state": vector, "action": action, "timestamp": _scalar(frame_index / FPS),
            "frame_index": _scalar(frame_index), "episode_index": _scalar(episode), "index": index,
            "task_index": _scalar(episode % TASKS), camera_key(0): {**pixel, "count": [frames]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, required=True)
    parser.add_argument("--root", type=Path, help="write here (must not exist) instead of into dl's cache folder")
    parser.add_argument("--per-file", type=int, default=1000, help="episodes per data and video file, even [1000]")
    parser.add_argument("--meta-per-file", type=int, default=META_PER_FILE,
                        help=f"rows per meta/episodes file [{META_PER_FILE}]")
    args = parser.parse_args()
    t0 = time.perf_counter()
    try:
        root = (write_scale_dataset(args.root, args.episodes, args.per_file, args.meta_per_file) if args.root
                else scale_dataset(args.episodes, args.per_file, args.meta_per_file))
    except (ValueError, FileExistsError) as exc:
        parser.error(str(exc))
    print(f"{root}: {args.episodes} episodes in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
