"""Datasets made with LeRobot's own tools (issue 50), every camera frame drawn with its row's index code, so the frame
a loader serves is checked exactly: LeRobot's writer (`LeRobotDataset.create` + `add_frame` + `save_episode`, which
joins each episode's recording onto the camera's video file, so `from_timestamp` is whatever the earlier recordings
lasted), `aggregate_datasets` of two such datasets, and the v2.1 -> v3.0 converter run on a v2.1 dataset written here
(per-episode parquet, per-episode mp4 encoded by LeRobot's `encode_video_frames`, the v2.1 meta/*.jsonl files).

`write` runs in an anchor's venv (LeRobot 0.4.4's, or 0.6.1's for a case whose `writer` is "0.6"):

    /work/anchor/venv/bin/python benchmarks/lerobot_made_cases.py write --out DIR --case lerobot_writer

`benchmarks/lerobot_parity.py cases --made DIR` writes the missing ones into DIR (a cache kept between runs) and
compares dl with both anchors on them (`made_specs`), at LeRobot's defaults and at each case's further settings.

Each case's truth is a `dl.testing.synthetic_spec.SyntheticConfig` (`truth`): its episode lengths, vectors
(`state_value`, `action_value` of the global index), tasks and timestamps are what was written, and every row's
camera frame is its own (`dl.testing.timing_cases.own_frame`): the code of its global index.
"""

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class MadeCase:
    """A dataset LeRobot's tools write: what it shows, the writer's version, its truth's `SyntheticConfig` fields,
    the episodes of the first of two aggregated datasets (`split`), and the settings it is read with besides
    LeRobot's defaults."""

    about: str
    writer: str
    fields: dict
    split: int = 0
    options: list = field(default_factory=list)


SHAPE = {"cameras": 1, "width": 128, "height": 96, "state_dim": 2, "action_dim": 2, "tasks": 2, "codec": "av1"}
MADE_CASES = {
    "lerobot_writer": MadeCase("LeRobot 0.4.4's writer, 30 fps, 6 episodes of 15-45 frames joined into one video file "
                               "per camera", "0.4", {"episodes": 6, "frames_per_episode": (15, 45)}),
    "lerobot_writer06": MadeCase("LeRobot 0.6.1's writer, as lerobot_writer", "0.6",
                                 {"episodes": 6, "frames_per_episode": (15, 45), "seed": 1}),
    "lerobot_writer_clock": MadeCase(
        "LeRobot 0.4.4's writer, the episode buffer's timestamps replaced before save_episode by a 29.97 fps "
        "camera's clock (frame_index x 1001/30000 s) while the video holds one frame per row at 30 fps",
        "0.4", {"episodes": 6, "frames_per_episode": (15, 45), "seed": 2, "recorded_timestamps": (0.0, 0.001, 0.0)},
        options=[{"tolerance_s": 0.002}]),
    "lerobot_aggregate": MadeCase("aggregate_datasets (LeRobot 0.4.4) of two datasets of LeRobot 0.4.4's writer (3 "
                                  "and 4 episodes): the second's episodes start where the first's file ends",
                                  "0.4", {"episodes": 7, "frames_per_episode": (15, 45), "seed": 3}, split=3),
    "lerobot_converted_drift": MadeCase(
        "the issue's arm: a v2.1 dataset at 10 fps with wall-clock timestamps 8% slow against one frame per row, "
        "converted by LeRobot 0.4.4's v2.1 -> v3.0 converter", "0.4",
        {"episodes": 5, "frames_per_episode": (40, 60), "fps": 10, "seed": 4, "recorded_timestamps": (0.0, 0.08, 0.0)},
        options=[{"tolerance_s": 0.05}, {"tolerance_s": 0.05, "frame_pairing": "row"}]),
}
"""Every LeRobot-made case, by name."""


def spec_module():
    """`dl.testing.synthetic_spec` (numpy only), imported from dl, or from the checkout in an anchor's venv."""
    try:
        from dl.testing import synthetic_spec
    except ImportError:
        path = REPO / "core" / "testing" / "synthetic_spec.py"
        where = importlib.util.spec_from_file_location("synthetic_spec", path)
        synthetic_spec = importlib.util.module_from_spec(where)
        sys.modules["synthetic_spec"] = synthetic_spec
        where.loader.exec_module(synthetic_spec)
    return synthetic_spec


def truth(name: str):
    """The `SyntheticConfig` whose values case `name` holds."""
    return spec_module().SyntheticConfig(**{**SHAPE, **MADE_CASES[name].fields})


def made_specs(made: Path, anchors: list[str], versions: list[str]) -> dict[str, tuple[Path, object, list[dict]]]:
    """`{case: (root, truth, [LeRobot's defaults, *further settings])}`, each case written into `made` with the anchor
    (`anchors`, their LeRobot `versions`) whose writer it names, unless already there."""
    out = {}
    for name, case in MADE_CASES.items():
        root = made / name
        if not (root / "meta" / "info.json").is_file():
            python = next(p for p, v in zip(anchors, versions, strict=True) if v.startswith(case.writer))
            subprocess.run([python, __file__, "write", "--out", str(made), "--case", name], check=True,
                           env={**os.environ, "HF_HUB_OFFLINE": "1"})
        out[name] = (root, truth(name), [{}, *case.options])
    return out


# ----------------------------------------------------------------------------------------- LeRobot side (its venv)


def _features(config) -> dict:
    spec = spec_module()
    return {"observation.state": {"dtype": "float32", "shape": (config.state_dim,),
                                  "names": [f"joint{j}" for j in range(config.state_dim)]},
            "action": {"dtype": "float32", "shape": (config.action_dim,),
                       "names": [f"joint{j}" for j in range(config.action_dim)]},
            spec.camera_key(0): {"dtype": "video", "shape": (config.height, config.width, 3),
                                 "names": ["height", "width", "channels"]}}


def _frame(config, index: int, episode: int) -> dict:
    spec = spec_module()
    return {"observation.state": spec.state_value(index, config.state_dim),
            "action": spec.action_value(index, config.action_dim),
            spec.camera_key(0): spec.frame_code(index, 0, width=config.width, height=config.height),
            "task": spec.task_string(episode % config.tasks)}


def write_with_writer(root: Path, config, episodes: range) -> None:
    """`episodes` of `config` written by LeRobot's writer into `root`; with `recorded_timestamps`, the episode
    buffer's timestamps are the recorded ones (0.4.4's buffer; its `add_frame` refuses a `timestamp` key)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    spec = spec_module()
    starts = np.concatenate([[0], np.cumsum(config.episode_lengths())])
    stamps = spec.timestamps(config)
    ds = LeRobotDataset.create(f"dl/{root.name}", config.fps, root=root, features=_features(config), use_videos=True)
    for episode in episodes:
        for index in range(int(starts[episode]), int(starts[episode + 1])):
            ds.add_frame(_frame(config, index, episode))
        if config.recorded_timestamps is not None:
            ds.episode_buffer["timestamp"] = stamps[starts[episode]:starts[episode + 1]].tolist()
        ds.save_episode()
    ds.finalize()


def write_aggregate(root: Path, config, split: int) -> None:
    """Episodes [0, split) and [split, episodes) written as two datasets by the writer, then `aggregate_datasets`."""
    from lerobot.datasets.aggregate import aggregate_datasets

    with tempfile.TemporaryDirectory(prefix=".parts-", dir=root.parent) as tmp:
        parts = [Path(tmp) / "a", Path(tmp) / "b"]
        write_with_writer(parts[0], config, range(split))
        write_with_writer(parts[1], config, range(split, config.episodes))
        aggregate_datasets([f"dl/{p.name}" for p in parts], f"dl/{root.name}", roots=parts, aggr_root=root)


def write_converted(root: Path, config) -> None:
    """`config` written as a v2.1 dataset (per-episode parquet and mp4, meta/*.jsonl), then converted in place by
    LeRobot's `convert_dataset` (the hub steps off: a local root, no push); the v2.1 copy is removed."""
    import datasets
    from lerobot.datasets.utils import get_hf_features_from_features
    from lerobot.datasets.v30.convert_dataset_v21_to_v30 import convert_dataset
    from lerobot.datasets.video_utils import encode_video_frames, get_video_info
    from PIL import Image

    spec = spec_module()
    lengths = config.episode_lengths()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    stamps = spec.timestamps(config)
    camera = spec.camera_key(0)
    work = root.parent / f".{root.name}-v21"
    v21 = work / "dl" / root.name
    features = {**_features(config), "timestamp": {"dtype": "float32", "shape": (1,), "names": None},
                **{k: {"dtype": "int64", "shape": (1,), "names": None}
                   for k in ("frame_index", "episode_index", "index", "task_index")}}
    hf_features = get_hf_features_from_features(features)
    episodes, stats = [], []
    for e, length in enumerate(lengths.tolist()):
        rows = np.arange(starts[e], starts[e + 1])
        frames = [_frame(config, int(i), e) for i in rows]
        table = {"observation.state": [f["observation.state"] for f in frames],
                 "action": [f["action"] for f in frames], "timestamp": stamps[rows].tolist(),
                 "frame_index": list(range(length)), "episode_index": [e] * length, "index": rows.tolist(),
                 "task_index": [e % config.tasks] * length}
        path = v21 / "data" / "chunk-000" / f"episode_{e:06d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        datasets.Dataset.from_dict(table, features=hf_features).to_parquet(str(path))
        with tempfile.TemporaryDirectory() as images:
            for k, f in enumerate(frames):
                Image.fromarray(f[camera]).save(Path(images) / f"frame-{k:06d}.png")
            video = v21 / "videos" / "chunk-000" / camera / f"episode_{e:06d}.mp4"
            encode_video_frames(images, video, config.fps)
        pixels = np.stack([f[camera] for f in frames]).astype(np.float64) / 255
        stats.append({"episode_index": e, "stats": {
            **{k: _stats(np.asarray(v, dtype=np.float64).reshape(length, -1)) for k, v in table.items()},
            camera: {s: np.asarray(v).reshape(-1, 1, 1).tolist() if s != "count" else v
                     for s, v in _stats(pixels.reshape(-1, 3)).items()}}})
        episodes.append({"episode_index": e, "tasks": [spec.task_string(e % config.tasks)], "length": length})
    features[camera]["info"] = get_video_info(video)
    info = {"codebase_version": "v2.1", "robot_type": None, "total_episodes": config.episodes,
            "total_frames": int(starts[-1]), "total_tasks": config.tasks, "total_videos": config.episodes,
            "total_chunks": 1, "chunks_size": 1000, "fps": config.fps, "splits": {"train": f"0:{config.episodes}"},
            "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
            "video_path": "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4",
            "features": {k: {**v, "shape": list(v["shape"])} for k, v in features.items()}}
    _jsonl(v21 / "meta" / "episodes.jsonl", episodes)
    _jsonl(v21 / "meta" / "tasks.jsonl", [{"task_index": t, "task": spec.task_string(t)} for t in range(config.tasks)])
    _jsonl(v21 / "meta" / "episodes_stats.jsonl", stats)
    (v21 / "meta" / "info.json").write_text(json.dumps(info, indent=4))
    convert_dataset(f"dl/{root.name}", root=str(work), push_to_hub=False)
    shutil.move(str(v21), str(root))
    shutil.rmtree(work)


def _stats(values: np.ndarray) -> dict:
    return {"min": values.min(0).tolist(), "max": values.max(0).tolist(), "mean": values.mean(0).tolist(),
            "std": values.std(0).tolist(), "count": [len(values)]}


def _jsonl(path: Path, items: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(item) + "\n" for item in items))


def write(args) -> None:
    case, config = MADE_CASES[args.case], truth(args.case)
    root = Path(args.out).absolute() / args.case
    if root.exists():
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    if args.case == "lerobot_converted_drift":
        write_converted(root, config)
    elif case.split:
        write_aggregate(root, config, case.split)
    else:
        write_with_writer(root, config, range(config.episodes))
    print(f"{args.case}: wrote {root} ({case.about})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["write"])
    parser.add_argument("--out", required=True, help="the folder the cases are cached in")
    parser.add_argument("--case", required=True, choices=sorted(MADE_CASES))
    write(parser.parse_args())
