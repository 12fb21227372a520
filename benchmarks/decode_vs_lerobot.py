"""dl's loaders against LeRobot's, side by side in one run: `map` (float32 and uint8) against `LeRobotDataset`,
`pool` over several decode budgets against `StreamingLeRobotDataset`, on open50 (MPEG-4 Part 2, GOP 12, one
camera) and on a generated AV1 GOP-2 640x480 two-camera dataset (LeRobot's codec and GOP), runs interleaved
and repeated so a noisy machine affects every configuration alike; medians, ratios and issue 7/7's targets.

    ../shared/anchors/lerobot/setup.sh                     # LeRobot 0.4.4 in a side venv ($TMPDIR/anchor)
    .venv/bin/python benchmarks/decode_vs_lerobot.py --repeats 3 --duration 15
    .venv/bin/python benchmarks/decode_vs_lerobot.py --datasets av1 --configs dl-pool-256M,lerobot-stream-w2

LeRobot runs go through the anchor's `anchor_bench.py` (its venv, `ANCHOR_ROOT` for the AV1 dataset); dl runs
through `dl run` (mode single, batch 16). The decode ceiling is each dl run's own `decode_ceiling` (the run's
decoder, uint8, the same files). Writes every run to --out (JSON) and prints one summary table per dataset.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dl_runs import DL, OPEN50, OPEN50_USABLE, REPO, dl_run

ANCHOR = REPO.parent / "shared" / "anchors" / "lerobot"
AV1 = {"episodes": "40", "frames": "300-500", "cameras": "2", "size": "640x480", "codec": "av1", "gop": "2",
       "episodes-per-file": "10"}
BUDGETS = ("0", "128M", "256M", "512M", "1G")
CONFIGS = ("lerobot-map-w2", "lerobot-stream-w2", "lerobot-stream-w0", "dl-map-f32-w2", "dl-map-u8-w2",
           *(f"dl-pool-{b}" for b in BUDGETS), "dl-pool-512M-w0")


def lerobot(config: str, root: Path | None, args) -> dict:
    """One anchor_bench.py run (LeRobot 0.4.4), its JSON in dl's field names."""
    loader, workers = config.split("-")[1], config.split("-w")[-1]
    env = {**os.environ, "ANCHOR_DIR": args.anchor_dir, **({"ANCHOR_ROOT": str(root)} if root else {})}
    command = [f"{args.anchor_dir}/venv/bin/python", str(ANCHOR / "anchor_bench.py"), "--loader", loader, "--mode",
               "single", "--batch-size", "16", "--num-workers", workers, "--window", str(args.duration)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=args.duration * 8 + 900)
    try:
        r = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"status": "failed", "error": done.stderr[-1500:]}
    if r.get("error"):
        return {"status": "failed", "error": r["error"]}
    return {"status": "ok", "samples_per_s": r["samples_per_s"], "peak_rss_gb": r["peak_rss_tree_mb"] / 1e3,
            "first_batch_latency_s": r["first_batch_s"], "shuffle_randomness_frac": r["shuffle_episode_frac"],
            "shuffle_randomness_ideal": r["shuffle_episode_frac_ideal"]}


def dl(config: str, root: Path, episodes: str | None, out: Path, args) -> dict:
    """One `dl run` (mode single, batch 16), its result JSON."""
    parts = config.split("-")
    workers = parts[-1][1:] if parts[-1].startswith("w") else "2"
    command = ["--root", str(root), "--batch-size", "16", "--num-workers", workers, "--duration", str(args.duration)]
    command += ["--episodes", episodes] if episodes else []
    if parts[1] == "map":
        command += ["--loader", "map", "--image-dtype", "float32" if parts[2] == "f32" else "uint8"]
    else:
        command += ["--loader", "pool", "--decode-budget", parts[2], "--loader-option",
                    f"episode_pool_size={args.pool_size}", "--loader-option", f"decode_chunk_frames={args.chunk}"]
    return dl_run(command, out, args.duration * 8 + 900)


def row_of(config: str, repeat: int, r: dict) -> dict:
    stats = r.get("loader_stats") or {}
    ceiling = r.get("decode_ceiling") or {}
    return {"config": config, "repeat": repeat, "status": r.get("status"), "error": r.get("error"),
            **{k: r.get(k) for k in ("samples_per_s", "peak_rss_gb", "first_batch_latency_s",
                                     "shuffle_randomness_frac", "shuffle_randomness_ideal",
                                     "decoded_frames_pct_of_random_ceiling",
                                     "decoded_frames_pct_of_sequential_ceiling")},
            "consumer_ideal": stats.get("shuffle_randomness_consumer_ideal"),
            "random_ceiling": ceiling.get("random_frames_per_s"),
            "sequential_ceiling": ceiling.get("sequential_frames_per_s")}


def median(rows: list[dict], config: str, key: str):
    values = [r[key] for r in rows if r["config"] == config and r["status"] == "ok" and r.get(key) is not None]
    return round(statistics.median(values), 3) if values else None


def summarize(name: str, rows: list[dict], configs: list[str]) -> dict:
    keys = ("samples_per_s", "peak_rss_gb", "first_batch_latency_s", "shuffle_randomness_frac", "consumer_ideal",
            "decoded_frames_pct_of_random_ceiling", "decoded_frames_pct_of_sequential_ceiling", "random_ceiling")
    table = {c: {k: median(rows, c, k) for k in keys} for c in configs}
    print(f"\n## {name} (medians of {max(r['repeat'] for r in rows) + 1} interleaved runs)")
    print("| config | samples/s | peak RSS GB | first batch s | shuffle (consumer ideal) | % random ceiling | "
          "% sequential ceiling |")
    print("|---|---|---|---|---|---|---|")
    for c, m in table.items():
        print(f"| {c} | {m['samples_per_s']} | {m['peak_rss_gb']} | {m['first_batch_latency_s']} | "
              f"{m['shuffle_randomness_frac']} ({m['consumer_ideal']}) | {m['decoded_frames_pct_of_random_ceiling']} | "
              f"{m['decoded_frames_pct_of_sequential_ceiling']} |")
    return table


def float32_extra_s_per_frame(root: Path, batch: int = 16, repeats: int = 20) -> tuple[float, float]:
    """(seconds, seconds) one core takes to stack one uint8 frame of `root`'s first camera into a float32 batch
    (`dl.dataloader.frames.float32_into`, what the map loader's workers do for float32 output) and into a uint8 batch (a
    straight copy): each the fastest of `repeats` batches of `batch` channels-last frames into a reused output
    buffer (the fastest, so that a busy machine cannot make the bound below too low)."""
    import numpy as np

    from dl.dataloader.frames import float32_into

    info = json.loads((root / "meta" / "info.json").read_text())
    h, w, c = next(f["shape"] for f in info["features"].values() if f.get("dtype") == "video")
    frames = np.random.default_rng(0).integers(0, 256, (batch, h, w, c), dtype=np.uint8)
    as_float, as_uint8 = np.empty(frames.shape, np.float32), np.empty_like(frames)

    def fastest(stack) -> float:
        times = []
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            for i in range(batch):
                stack(i)
            times.append(time.perf_counter() - t0)
        return min(times[1:]) / batch

    def copy(i):
        as_uint8[i] = frames[i]

    return fastest(lambda i: float32_into(as_float[i], frames[i])), fastest(copy)


def float32_bound(root: Path, table: dict) -> str | None:
    """An upper bound on the float32 map rate here: the uint8 run's cost per sample (all cores busy) plus what
    stacking its frames as float32 costs more than stacking them as uint8 (measured at its fastest), with no
    other cost and no contention for memory, as a share of the random-decode ceiling. None without both map
    runs."""
    u8, f32 = table.get("dl-map-u8-w2", {}), table.get("dl-map-f32-w2", {})
    if not (u8.get("samples_per_s") and u8.get("random_ceiling") and u8.get("decoded_frames_pct_of_random_ceiling")):
        return None
    cores = len(os.sched_getaffinity(0))
    frames_per_sample = u8["decoded_frames_pct_of_random_ceiling"] / 100 * u8["random_ceiling"] / u8["samples_per_s"]
    to_float, to_uint8 = float32_extra_s_per_frame(root)
    bound = cores / (cores / u8["samples_per_s"] + frames_per_sample * max(to_float - to_uint8, 0.0))
    pct = 100 * bound * frames_per_sample / u8["random_ceiling"]
    return (f"dl-map-f32-w2 bound: stacking a frame as float32 takes {to_float * 1e3:.3f} ms on one core, as uint8 "
            f"{to_uint8 * 1e3:.3f} ms; the uint8 rate plus the difference on {cores} cores allows at most "
            f"{bound:.0f} samples/s = {pct:.1f}% of the random-decode ceiling (measured: "
            f"{f32.get('samples_per_s')} samples/s, {f32.get('decoded_frames_pct_of_random_ceiling')}%)")


def targets(table: dict) -> list[str]:
    """Issue 7/7's targets on one dataset's medians."""
    lines = []
    lr_map, lr_stream = table.get("lerobot-map-w2", {}), table.get("lerobot-stream-w2", {})

    def ratio(a, b):
        return round(a / b, 2) if a and b else None

    if lr_map.get("samples_per_s"):
        for config, goal in (("dl-map-f32-w2", 1.8), ("dl-map-u8-w2", 2.5)):
            got = ratio(table.get(config, {}).get("samples_per_s"), lr_map["samples_per_s"])
            verdict = "met" if got and got >= goal else "NOT met"
            lines.append(f"{config}: {got}x LeRobot map (target >= {goal}x): {verdict}")
    for config in ("dl-map-f32-w2", "dl-map-u8-w2"):
        pct = table.get(config, {}).get("decoded_frames_pct_of_random_ceiling")
        if pct is not None:
            lines.append(f"{config}: {pct}% of the random-decode ceiling (target >= 60%): "
                         f"{'met' if pct >= 60 else 'NOT met'}")
    if lr_stream.get("samples_per_s"):
        for config in (c for c in table if c.startswith("dl-pool") and not c.endswith("w0")):
            m = table[config]
            speed, rss = ratio(m["samples_per_s"], lr_stream["samples_per_s"]), ratio(m["peak_rss_gb"],
                                                                                      lr_stream["peak_rss_gb"])
            shuffle = ratio(m["shuffle_randomness_frac"], m["consumer_ideal"])
            met = (speed or 0) >= 1.5 and (rss or 9) <= 0.2 and (m["first_batch_latency_s"] or 9) < 1 and \
                (shuffle or 0) >= 0.95
            lines.append(f"{config}: {speed}x LeRobot streaming samples/s (>= 1.5), {rss} of its peak RSS (<= 0.2), "
                         f"first batch {m['first_batch_latency_s']} s (< 1), shuffle {shuffle} of the consumer ideal "
                         f"(>= 0.95): {'all met' if met else 'NOT all met'}")
    return lines


def av1_root(args) -> Path:
    root = Path(args.av1_root)
    if not (root / "meta" / "info.json").is_file():
        print(f"generating the AV1 GOP-2 dataset into {root} (once)", flush=True)
        flags = [f"--{k}={v}" for k, v in AV1.items()]
        subprocess.run([DL, "synthetic-dataset", str(root), *flags], check=True)
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--anchor-dir", default=os.environ.get("ANCHOR_DIR", f"{tempfile.gettempdir()}/anchor"))
    parser.add_argument("--open50", default=str(OPEN50))
    parser.add_argument("--av1-root", default=f"{tempfile.gettempdir()}/dl-av1-gop2-640x480")
    parser.add_argument("--datasets", default="open50,av1")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}")
    parser.add_argument("--duration", type=float, default=15.0, help="steady window per run, s")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pool-size", type=int, default=32)
    parser.add_argument("--chunk", default="auto", help="pool decode_chunk_frames: frames, or auto")
    parser.add_argument("--out", default="decode_vs_lerobot.json")
    args = parser.parse_args()
    if not Path(args.anchor_dir, "venv", "bin", "python").is_file():
        print(f"no LeRobot anchor at {args.anchor_dir}: run {ANCHOR}/setup.sh first", file=sys.stderr)
        return 2
    configs = args.configs.split(",")
    datasets = {"open50": (Path(args.open50), OPEN50_USABLE), "av1": (None, None)}
    report = {"args": vars(args), "datasets": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            root, episodes = datasets[name]
            root = root or av1_root(args)
            rows = []
            for repeat in range(args.repeats):
                for config in configs:
                    out = Path(tmp) / f"{name}-{config}-{repeat}"
                    anchor_root = None if name == "open50" else root
                    r = lerobot(config, anchor_root, args) if config.startswith("lerobot") else dl(
                        config, root, episodes, out, args)
                    rows.append(row_of(config, repeat, r))
                    print(json.dumps(rows[-1]), flush=True)
            table = summarize(name, rows, configs)
            checks = targets(table) + [line for line in [float32_bound(root, table)] if line]
            print("\n".join(checks))
            report["datasets"][name] = {"root": str(root), "runs": rows, "medians": table, "targets": checks}
    Path(args.out).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
