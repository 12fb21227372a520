"""LeRobot 0.6.1's own `lerobot-train`, the same run on LeRobot's `LeRobotDataset` and on dl's `map` and `pool`
(`dl train`), interleaved, reported with lerobot-train's own meters: `data_s` (its data wait per step), `updt_s`,
steps/s (1 / (data_s + updt_s)), the loss of its first and last log windows, and the peak RSS of the process tree.

    scripts/setup_lerobot.sh        # LeRobot 0.6.1 + dl in $ANCHOR_DIR/venv06
    .venv/bin/python benchmarks/lerobot_train.py --repeats 3 --steps 200
    .venv/bin/python benchmarks/lerobot_train.py --datasets generated --policies diffusion --repeats 1 --steps 60

Datasets (written once into dl's cache folder): `open50` (the team's real one, 43 complete episodes, its keys
renamed to LeRobot's `action` / `observation.state` / `observation.images.image` with `dl.testing.renamed`, since
LeRobot's policies want those names; one 480x640 MPEG-4 camera, GOP ~12) and `generated` (dl's writer: 2 cameras at
480x640, AV1 GOP 2 as LeRobot records, 24 episodes of 90-150 frames; `generated_96x128` the same at 96x128, where
ACT's ResNet-18 on full frames takes under a second a step on a CPU). Policies: `diffusion` (small U-Net, frames
resized to 96x128 inside the policy, 2 observation steps per camera) and `act` (tiny transformer; ResNet-18 on full
frames, so its update dominates on a CPU); `diffusion_small` resizes to 48x64. Batch 8 (`--batch-size`), 2
workers (`--num-workers`), LeRobot's default `spawn` workers. `--resume` checks lerobot-train's resume: each run
saves at half its steps and a second process resumes from there, its losses beside the uninterrupted run's.
The first log window (worker start, the first batches) is left out of data_s and updt_s. Prints one line per run
and a table of medians (ranges) per dataset, policy and loader; --out writes every run as JSON.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from dl.kits.paths import cache_dir
from dl.testing.renamed import renamed_dataset
from dl.testing.synthetic import SyntheticConfig, write_synthetic_dataset

HERE = Path(__file__).resolve().parent
OPEN50 = HERE.parents[1] / "shared" / "datasets" / "open50"
OPEN50_MISSING = {1, 2, 7, 9, 25, 33, 34}
OPEN50_NAMES = {"actions": "action", "state": "observation.state", "image": "observation.images.image"}
GENERATED = SyntheticConfig(episodes=24, cameras=2, width=640, height=480, codec="av1", gop=2, episodes_per_file=4)
GENERATED_SMALL = SyntheticConfig(episodes=24, cameras=2, width=128, height=96, codec="av1", gop=2,
                                  episodes_per_file=4)
POLICIES = {
    "diffusion": ["--policy.type=diffusion", "--policy.resize_shape=[96,128]", "--policy.crop_shape=[84,112]",
                  "--policy.down_dims=[32,64]", "--policy.horizon=16", "--policy.n_action_steps=8",
                  "--policy.drop_n_last_frames=7", "--policy.diffusion_step_embed_dim=32",
                  "--policy.spatial_softmax_num_keypoints=16", "--policy.use_separate_rgb_encoder_per_camera=false"],
    "diffusion_small": ["--policy.type=diffusion", "--policy.resize_shape=[48,64]", "--policy.crop_shape=[40,56]",
                        "--policy.down_dims=[16,32]", "--policy.horizon=16", "--policy.n_action_steps=8",
                        "--policy.drop_n_last_frames=7", "--policy.diffusion_step_embed_dim=16",
                        "--policy.spatial_softmax_num_keypoints=8",
                        "--policy.use_separate_rgb_encoder_per_camera=false"],
    "act": ["--policy.type=act", "--policy.dim_model=64", "--policy.n_heads=2", "--policy.dim_feedforward=128",
            "--policy.n_encoder_layers=1", "--policy.n_decoder_layers=1", "--policy.chunk_size=10",
            "--policy.n_action_steps=10"],
}
COMMON = ["--policy.device=cpu", "--policy.push_to_hub=false", "--policy.pretrained_backbone_weights=null",
          "--wandb.enable=false", "--seed=1"]
LOADERS = ("lerobot", "map", "pool")
METER = re.compile(r"step:(\d+)\S* .*?loss:([\d.]+).*?updt_s:([\d.]+) data_s:([\d.]+)")


def datasets(names: list[str]) -> dict[str, tuple[Path, list[int] | None]]:
    """`{name: (root, episodes)}`, written into dl's cache folder the first time."""
    folder = cache_dir() / "bench" / "lerobot_train"
    out = {}
    if "open50" in names:
        root = folder / "open50_lerobot_names"
        if not (root / "meta" / "info.json").is_file():
            renamed_dataset(OPEN50, root, OPEN50_NAMES)
        out["open50"] = (root, [e for e in range(50) if e not in OPEN50_MISSING])
    if "generated" in names:
        root = folder / "generated_2cam_480x640"
        if not (root / "meta" / "info.json").is_file():
            write_synthetic_dataset(root, GENERATED)
        out["generated"] = (root, None)
    if "generated_96x128" in names:
        root = folder / "generated_2cam_96x128"
        if not (root / "meta" / "info.json").is_file():
            write_synthetic_dataset(root, GENERATED_SMALL)
        out["generated_96x128"] = (root, None)
    return out


def command(python: Path, loader: str, root: Path, episodes, policy: str, steps: int, out: Path,
            workers: int = 2, save_at: int | None = None, batch: int = 8) -> list[str]:
    """lerobot-train's (or `dl train`'s) command line for one run; `save_at` saves a checkpoint at that step."""
    args = [f"--dataset.repo_id=bench/{root.name}", f"--dataset.root={root}", f"--output_dir={out}",
            f"--steps={steps}", f"--log_freq={max(steps // 4, 1)}", f"--save_freq={save_at or steps * 10}", *COMMON,
            f"--num_workers={workers}", f"--batch_size={batch}", *POLICIES[policy]]
    if episodes is not None:
        args.append(f"--dataset.episodes={json.dumps(episodes)}")
    if loader == "lerobot":
        return [str(python.with_name("lerobot-train")), *args]
    return [str(python.with_name("dl")), "train", *args, f"--dl.loader={loader}"]


def resume_command(python: Path, loader: str, out: Path, step: int) -> list[str]:
    """`lerobot-train --resume=true` (or `dl train`'s, its dl options from the checkpoint) from the checkpoint a run
    saved at `step`."""
    config = out / "checkpoints" / f"{step:06d}" / "pretrained_model" / "train_config.json"
    program = ([str(python.with_name("lerobot-train"))] if loader == "lerobot"
               else [str(python.with_name("dl")), "train"])
    return [*program, "--resume=true", f"--config_path={config}"]


def peak_tree_rss(process: subprocess.Popen, stop: threading.Event, peak: list[int]) -> None:
    """Sample the RSS of `process` and its children every 0.5 s into `peak[0]`."""
    root = psutil.Process(process.pid)
    while not stop.is_set():
        try:
            total = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
            peak[0] = max(peak[0], total)
        except psutil.Error:
            pass
        stop.wait(0.5)


def train(cmd: list[str]) -> tuple[int, str, list[tuple], float, int]:
    """Run one training process: (exit code, its log, its meter windows (step, loss, updt_s, data_s), wall s,
    peak RSS bytes of its process tree)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
    t0 = time.perf_counter()
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    stop, peak = threading.Event(), [0]
    sampler = threading.Thread(target=peak_tree_rss, args=(process, stop, peak), daemon=True)
    sampler.start()
    log = process.communicate()[0]
    stop.set()
    sampler.join()
    windows = [(int(s), float(loss), float(u), float(d)) for s, loss, u, d in METER.findall(log)]
    return process.returncode, log, windows, time.perf_counter() - t0, peak[0]


def run_once(python: Path, loader: str, name: str, root: Path, episodes, policy: str, steps: int, work: Path,
             workers: int = 2, resume: bool = False, batch: int = 8) -> dict:
    """One run and its meters; with `resume` it saves at half its steps, then a second process
    resumes from that checkpoint to the end, and the result holds both runs' losses after the save."""
    out = work / f"{name}-{policy}-{loader}-{time.monotonic_ns()}"
    save_at = steps // 2 if resume else None
    code, log, windows, wall, peak = train(command(python, loader, root, episodes, policy, steps, out, workers,
                                                   save_at, batch))
    result = {"dataset": name, "policy": policy, "loader": loader, "workers": workers, "batch": batch, "exit": code,
              "wall_s": round(wall, 1), "peak_rss_gb": round(peak / 1e9, 2)}
    if code != 0 or len(windows) < 2:
        return {**result, "error": log[-2000:]}
    steady = windows[1:]
    updt = statistics.mean(w[2] for w in steady)
    data = statistics.mean(w[3] for w in steady)
    result.update(updt_s=round(updt, 4), data_s=round(data, 4), steps_per_s=round(1 / (updt + data), 2),
                  loss_first=windows[0][1], loss_last=windows[-1][1],
                  losses={str(s): loss for s, loss, _, _ in windows})
    if save_at:
        code, log, resumed, _, _ = train(resume_command(python, loader, out, save_at))
        if code != 0 or not resumed:
            return {**result, "error": "resume: " + log[-2000:]}
        result["resumed_losses"] = {str(s): loss for s, loss, _, _ in resumed}
    return result


def summary(results: list[dict]) -> None:
    print("\n| dataset | policy | loader | data_s | updt_s | steps/s | peak RSS GB | loss first -> last |")
    print("|---|---|---|---|---|---|---|---|")
    keys = sorted({(r["dataset"], r["policy"]) for r in results})
    for dataset, policy in keys:
        medians = {}
        for loader in LOADERS:
            runs = [r for r in results if (r["dataset"], r["policy"], r["loader"]) == (dataset, policy, loader)
                    and "data_s" in r]
            if not runs:
                continue

            def cell(key, runs=runs):
                values = [r[key] for r in runs]
                return f"{statistics.median(values):g} ({min(values):g}-{max(values):g})", statistics.median(values)

            medians[loader] = cell("data_s")[1]
            losses = f"{statistics.median(r['loss_first'] for r in runs):.3f} -> " \
                     f"{statistics.median(r['loss_last'] for r in runs):.3f}"
            print(f"| {dataset} | {policy} | {loader} | {cell('data_s')[0]} | {cell('updt_s')[0]} | "
                  f"{cell('steps_per_s')[0]} | {cell('peak_rss_gb')[0]} | {losses} |")
        if "lerobot" in medians:
            ratios = ", ".join(f"{k} {medians[k] / medians['lerobot']:.2f}" for k in ("map", "pool") if k in medians
                               and medians["lerobot"] > 0)
            print(f"|  |  | data_s / LeRobot's | {ratios} (goal <= 0.33) |  |  |  |  |")
    resumed = [r for r in results if "resumed_losses" in r]
    if resumed:
        print("\n| dataset | policy | loader | losses after the save, uninterrupted | resumed from the save | equal |")
        print("|---|---|---|---|---|---|")
        for r in resumed:
            after = {s: r["losses"][s] for s in r["resumed_losses"] if s in r["losses"]}
            print(f"| {r['dataset']} | {r['policy']} | {r['loader']} | {fmt_losses(after)} | "
                  f"{fmt_losses(r['resumed_losses'])} | {'yes' if after == r['resumed_losses'] else 'no'} |")


def fmt_losses(losses: dict) -> str:
    return ", ".join(f"{step}: {loss:.3f}" for step, loss in losses.items())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", type=Path, default=Path(os.environ.get("ANCHOR_DIR", "/tmp/anchor")) /
                        "venv06" / "bin" / "python", help="LeRobot 0.6.1's python (scripts/setup_lerobot.sh)")
    parser.add_argument("--datasets", default="open50,generated")
    parser.add_argument("--policies", default="diffusion,act")
    parser.add_argument("--loaders", default=",".join(LOADERS))
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--num-workers", type=int, default=2, help="lerobot-train's --num_workers [2]")
    parser.add_argument("--out", type=Path, default=None, help="write every run as JSON here")
    parser.add_argument("--resume", action="store_true",
                        help="each run saves at half the steps, and a second process (`--resume=true`) trains "
                             "from that checkpoint to the end: its losses beside the uninterrupted run's")
    parser.add_argument("--batch-size", type=int, default=8, help="lerobot-train's --batch_size [8]")
    args = parser.parse_args(argv)
    if not args.python.is_file():
        print(f"no LeRobot 0.6.1 environment at {args.python}: run scripts/setup_lerobot.sh", file=sys.stderr)
        return 2
    loaders = args.loaders.split(",")
    work = cache_dir() / "bench" / "lerobot_train" / "runs"
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for name, (root, episodes) in datasets(args.datasets.split(",")).items():
        for policy in args.policies.split(","):
            for repeat in range(args.repeats):
                order = loaders[repeat % len(loaders):] + loaders[:repeat % len(loaders)]  # A B C, B C A, C A B
                for loader in order:
                    result = run_once(args.python, loader, name, root, episodes, policy, args.steps, work,
                                      args.num_workers, args.resume, args.batch_size)
                    results.append(result)
                    print(json.dumps({k: v for k, v in result.items() if k != "error"}), flush=True)
                    if "error" in result:
                        print(result["error"], file=sys.stderr)
    summary(results)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
