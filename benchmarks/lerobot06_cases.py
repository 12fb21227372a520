"""LeRobot 0.6.1 datasets with a depth camera and language annotations, written by LeRobot's own tools, and dl's
samples compared with LeRobot 0.6.1's on every key (`benchmarks/lerobot_parity.py lerobot06` runs all three steps).

- `write` (the 0.6.1 anchor's python): `LeRobotDataset.create` + `add_frame` / `save_episode` with an RGB camera, a
  depth camera (uint16 millimetres, `is_depth_map` in the feature's info: LeRobot's `DepthEncoderConfig`, lossless
  12-bit HEVC) and state/action; then the annotation pipeline's writer (`LanguageColumnsWriter`, fed staged module
  outputs as its plan/interjection/VQA modules stage them) and the executor's info.json update (the `tools` list).
- `annotate` (the anchor's python): the same annotation step alone, on a dataset written elsewhere (dl's generator
  with LeRobot 0.4's `subtask_index`, which the writer drops from the parquet and leaves in info.json).
- `dump` (the anchor's python): every sample of `LeRobotDataset` (`depth_output_unit` mm, its default, or m), in
  index order, with and without windows, saved with `torch.save`.
- `compare` (dl's python): dl's `map` loader in shuffled order, `pool`, and both through `dl.make_dataloader` with 2
  workers, sample by sample against the dump: depth to the exact float, language lists equal. Prints the counts.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

FPS, HEIGHT, WIDTH = 15, 48, 64
LENGTHS = (70, 81, 77, 86)  # 314 frames, as the dataset
DL_ADDITIONS = ("subtask",)
"""Keys dl serves that LeRobot 0.6.1 does not: LeRobot 0.4's `subtask` string (from `subtask_index`)."""


def delta(root) -> dict[str, list[float]]:
    """The windows both sides read with: two past frames of a depth camera, one of other cameras, one past and one
    future state."""
    info = json.loads((Path(root) / "meta" / "info.json").read_text())
    fps, out = info["fps"], {}
    for key, feature in info["features"].items():
        if feature["dtype"] == "video":
            depth = (feature.get("info") or {}).get("is_depth_map")
            out[key] = [-2 / fps, 0.0] if depth else [-1 / fps, 0.0]
    return out | {"observation.state": [-1 / fps, 0.0, 1 / fps]}


def _depth_mm(index: int) -> np.ndarray:
    """A depth map in mm (uint16 [H, W, 1]): a ramp from 200 mm to 6 m shifted per frame."""
    ramp = np.linspace(200, 6000, WIDTH)[None, :] + 13 * index + 7 * np.arange(HEIGHT)[:, None]
    return ramp.astype(np.uint16)[..., None]


def _rgb(index: int) -> np.ndarray:
    rng = np.random.default_rng(index)
    return rng.integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8)


def write(args) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    features = {
        "observation.state": {"dtype": "float32", "shape": (4,), "names": [f"j{i}" for i in range(4)]},
        "action": {"dtype": "float32", "shape": (4,), "names": [f"j{i}" for i in range(4)]},
        "observation.images.front": {"dtype": "video", "shape": (HEIGHT, WIDTH, 3),
                                     "names": ["height", "width", "channels"]},
        "observation.images.depth": {"dtype": "video", "shape": (HEIGHT, WIDTH, 1),
                                     "names": ["height", "width", "channels"], "info": {"is_depth_map": True}},
    }
    root = Path(args.root)
    ds = LeRobotDataset.create("dl/lerobot06_depth_language", FPS, root=root, features=features, use_videos=True)
    index = 0
    for episode, length in enumerate(LENGTHS):
        for _ in range(length):
            ds.add_frame({"observation.state": np.full(4, index, np.float32) + np.arange(4, dtype=np.float32) / 8,
                          "action": -np.full(4, index, np.float32), "observation.images.front": _rgb(index),
                          "observation.images.depth": _depth_mm(index), "task": f"task {episode % 2}"})
            index += 1
        ds.save_episode()
    ds.finalize()
    annotate(argparse.Namespace(root=str(root)))
    print(f"wrote {root}: {sum(LENGTHS)} frames, {len(LENGTHS)} episodes")


def annotate(args) -> None:
    """LeRobot 0.6.1's annotation writer on the dataset at `args.root`, in place (it drops `subtask_index`)."""
    from lerobot.annotations.steerable_pipeline.executor import Executor
    from lerobot.annotations.steerable_pipeline.reader import iter_episodes
    from lerobot.annotations.steerable_pipeline.staging import EpisodeStaging
    from lerobot.annotations.steerable_pipeline.writer import LanguageColumnsWriter, speech_atom

    root = Path(args.root)
    staging = root.parent / f"{root.name}.staging"
    records = list(iter_episodes(root))
    for record in records:
        ts = record.frame_timestamps
        plan = [{"role": "assistant", "content": f"subtask {k} of episode {record.episode_index}", "style": "subtask",
                 "timestamp": float(ts[k * len(ts) // 3]), "camera": None, "tool_calls": None} for k in range(3)]
        plan.append({"role": "assistant", "content": "1. reach 2. grasp 3. lift", "style": "plan",
                     "timestamp": float(ts[0]), "camera": None, "tool_calls": None})
        interjections = [{"role": "user", "content": "go faster", "style": "interjection",
                          "timestamp": float(ts[len(ts) // 2]), "camera": None, "tool_calls": None},
                         speech_atom(float(ts[len(ts) // 2]), "speeding up")]
        vqa = [{"role": "assistant", "content": "a red cube", "style": "vqa", "timestamp": float(ts[5]),
                "camera": "observation.images.front", "tool_calls": None}]
        stage = EpisodeStaging(staging, record.episode_index)
        stage.write("plan", plan)
        stage.write("interjections", interjections)
        stage.write("vqa", vqa)
    LanguageColumnsWriter().write_all(records, staging, root)
    Executor._ensure_annotation_metadata_in_info(root)


def dump(args) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    out = {}
    for windows in (False, True):
        ds = LeRobotDataset("dl/lerobot06_depth_language", root=args.root, depth_output_unit=args.unit,
                            delta_timestamps=delta(args.root) if windows else None)
        out[windows] = [_item(ds, i) for i in range(len(ds))]
    torch.save(out, args.out)
    print(f"dumped {len(out[False])} samples x 2 to {args.out}")


def _item(ds, i: int) -> dict:
    """LeRobot's sample `i`, or `{"__error__": why}` where LeRobot raises."""
    try:
        return ds[i]
    except Exception as exc:  # noqa: BLE001 - any failure of LeRobot's is an outcome to count
        return {"__error__": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}


def _equal(ours, theirs) -> bool:
    if isinstance(theirs, torch.Tensor):
        return isinstance(ours, torch.Tensor) and ours.shape == theirs.shape and ours.dtype == theirs.dtype and bool(
            torch.equal(ours, theirs))
    return ours == theirs


def _mismatches(sample: dict, ref: dict) -> list[str]:
    keys = (set(ref) | set(sample)) - set(DL_ADDITIONS)
    return sorted(k for k in keys if k not in sample or k not in ref or not _equal(sample[k], ref[k]))


def compare(args) -> int:
    import dl

    ref = torch.load(args.ref, weights_only=False)
    bad = 0
    for windows in (False, True):
        config = {"depth_output_unit": args.unit, **({"delta_timestamps": delta(args.root)} if windows else {})}
        want = ref[windows]
        for loader in ("map", "pool"):
            ds = dl.make_dataset(args.root, loader=loader, **config)
            if loader == "map":
                order = np.random.default_rng(0).permutation(len(ds)).tolist()
                samples = [ds[i] for i in order]
            else:
                samples = list(ds)
            counts = _count(samples, want)
            workers = dl.make_dataloader(ds, batch_size=8, num_workers=2)
            batches = [_unbatch(b) for b in workers]
            counts_w = _count([s for b in batches for s in b], want)
            raised = f" (LeRobot raised on the other {counts[3]}, dl served them)" if counts[3] else ""
            print(f"depth in {args.unit}, windows={windows} {loader}: {counts[0]}/{counts[1]} samples equal on every "
                  f"key{raised}; through a DataLoader (2 workers, batch 8): {counts_w[0]}/{counts_w[1]}; differing "
                  f"keys: {sorted(counts[2] | counts_w[2])}")
            bad += counts[1] - counts[0] - counts[3] + counts_w[1] - counts_w[0] - counts_w[3]
    errors = [s["__error__"] for s in ref[False] + ref[True] if "__error__" in s]
    if errors:
        print(f"LeRobot's error, e.g.: {errors[0][:160]}")
    return 1 if bad else 0


def _count(samples: list[dict], want: list[dict]) -> tuple[int, int, set, int]:
    """(samples equal on every key, samples, differing keys, samples LeRobot raised on: dl served them)."""
    same, failed, keys = 0, 0, set()
    for sample in samples:
        ref = want[int(sample["index"])]
        if "__error__" in ref:
            failed += 1
            continue
        wrong = _mismatches(sample, ref)
        same += not wrong
        keys.update(wrong)
    return same, len(samples), keys, failed


def _unbatch(batch: dict) -> list[dict]:
    n = len(batch["index"])
    return [{k: (v[i] if isinstance(v, torch.Tensor | list) else v) for k, v in batch.items()} for i in range(n)]


LEROBOT06_CASES = {
    "lerobot_writer": "LeRobot 0.6.1's writer (RGB + depth camera, GOP 2) and annotation writer: 314 frames",
    "annotated_v04": "dl's generator with LeRobot 0.4's subtask_index and a depth camera (GOP 2), annotated by LeRobot "
                     "0.6.1's writer (subtask_index leaves the parquet, stays in info.json)",
    "depth_gop4": "a depth camera with a 4-frame GOP (open GOPs: LeRobot 0.6.1's single seek misses leading B-frames)",
}


def run_all(out: Path, anchor_python: str) -> int:
    """Every `LEROBOT06_CASES` dataset written into `out`, LeRobot 0.6.1's samples dumped with `anchor_python` (its
    venv), dl's compared (map, pool, with and without windows, through a DataLoader with 2 workers; mm and m).
    Returns 1 when some comparison fails."""
    from dl.testing.synthetic import SyntheticConfig, write_synthetic_dataset

    here = Path(__file__)
    anchor = [anchor_python, str(here)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    small = dict(episodes=4, frames_per_episode=(30, 45), cameras=1, width=64, height=64, codec="h264",
                 episodes_per_file=2, depth_camera=True)
    failed = 0
    for name in LEROBOT06_CASES:
        root = out / name
        if not root.exists():
            if name == "lerobot_writer":
                subprocess.run([*anchor, "write", "--root", str(root)], check=True, env=env)
            else:
                write_synthetic_dataset(root, SyntheticConfig(**small, gop=2 if name == "annotated_v04" else 4,
                                                              subtasks=3 if name == "annotated_v04" else 0))
                if name == "annotated_v04":
                    subprocess.run([*anchor, "annotate", "--root", str(root)], check=True, env=env)
        for unit in ("mm", "m"):
            ref = out / f"{name}.{unit}.pt"
            if not ref.exists():
                subprocess.run([*anchor, "dump", "--root", str(root), "--out", str(ref), "--unit", unit], check=True,
                               env=env)
            print(f"== {name} ({LEROBOT06_CASES[name]}), depth in {unit}", flush=True)
            failed += subprocess.run([sys.executable, str(here), "compare", "--root", str(root), "--ref", str(ref),
                                      "--unit", unit]).returncode != 0
    return 1 if failed else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("write", "annotate", "dump", "compare"):
        p = sub.add_parser(name)
        p.add_argument("--root", required=True)
        if name in ("dump", "compare"):
            p.add_argument("--unit", default="mm", choices=("mm", "m"), help="depth_output_unit")
        if name == "dump":
            p.add_argument("--out", required=True)
        if name == "compare":
            p.add_argument("--ref", required=True)
    args = parser.parse_args(argv)
    return {"write": write, "annotate": annotate, "dump": dump, "compare": compare}[args.command](args) or 0


if __name__ == "__main__":
    sys.exit(main())
