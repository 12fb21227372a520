"""A 2-dataset mixture against its members run alone: the same `dl run` (loader, workers, batch size, window) on
member a, on member b, and on their mixture (`--mix a:0.7 --mix b:0.3`, b's cameras renamed to a's), interleaved so
that a noisy machine affects each configuration alike. Issue 20's target: the mixture's samples/s within 10% of the
weighted mean of its members' (0.7 x a + 0.3 x b), its peak RSS at most the sum of theirs.

    .venv/bin/python benchmarks/mixture.py                        # pool loader, 2 workers, 20 s windows, 2 rounds
    .venv/bin/python benchmarks/mixture.py --loader map --repeats 3 --duration 30

Member a is dl's embedded default dataset (24 episodes of 90-150 frames, two 128x96 AV1 cameras, 30 fps); member b is
generated once into dl's cache folder: 16 episodes of 60-120 frames at 15 fps, two 128x96 H.264 cameras named
`observation.images.top` and `observation.images.wrist`. Prints one line per run and a summary (median samples/s and
peak RSS per configuration, the members' weighted means, the mixture's ratios to them), and writes every result to
--out (JSON). The weighted arithmetic mean is the target's yardstick; the weighted harmonic mean, 1 / (0.7 / a +
0.3 / b), is what a mixture costs when each sample costs what it costs alone (the two differ when a and b do).
"""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from dl_runs import dl_run as run

from dl.bench.default_dataset import ensure_default_dataset
from dl.kits.paths import cache_dir
from dl.testing.renamed import renamed_dataset
from dl.testing.synthetic import SyntheticConfig, write_synthetic_dataset

B = SyntheticConfig(episodes=16, frames_per_episode=(60, 120), fps=15, codec="h264", gop=4, seed=7)
B_TAG = "mixture-b-v1"  # names member b's cache folder; bump when B changes
B_NAMES = {"observation.images.cam0": "observation.images.top", "observation.images.cam1": "observation.images.wrist"}
WEIGHTS = (0.7, 0.3)


def member_b() -> Path:
    """Member b, generated and renamed once into dl's cache folder."""
    root = cache_dir("datasets") / B_TAG
    if not (root / "meta" / "info.json").is_file():
        with tempfile.TemporaryDirectory() as tmp:
            renamed_dataset(write_synthetic_dataset(Path(tmp) / "b", B), root, B_NAMES)
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loader", default="pool")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--duration", type=float, default=20.0, help="steady window per run, s")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default="mixture.json")
    args = parser.parse_args()
    a, b = ensure_default_dataset(), member_b()
    common = ["--loader", args.loader, "--batch-size", str(args.batch_size), "--num-workers", str(args.num_workers),
              "--duration", str(args.duration)]
    configs = {"a": ["--root", str(a)], "b": ["--root", str(b)],
               "mixture": ["--mix", f"{a}:{WEIGHTS[0]}", "--mix", f"{b}:{WEIGHTS[1]}",
                           *(f"--mix-rename={old}={new}" for new, old in B_NAMES.items())]}
    results: dict[str, list[dict]] = {name: [] for name in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for name, options in configs.items():
                result = run([*common, *options], Path(tmp) / f"{name}-{repeat}", args.duration * 6 + 600)
                if result.get("status") != "ok":
                    print(f"{name} run {repeat} failed: {result.get('error')}", file=sys.stderr)
                    return 1
                results[name].append(result)
                shares = ""
                if name == "mixture":
                    stats = result["loader_stats"]
                    drawn = [stats["member0_samples"], stats["member1_samples"]]
                    shares = f"  shares {drawn[0] / sum(drawn):.3f} / {drawn[1] / sum(drawn):.3f}"
                print(f"{name:8s} run {repeat}: {result['samples_per_s']:8.1f} samples/s  peak RSS "
                      f"{result['peak_rss_gb']:.3f} GB{shares}", flush=True)
    rate = {n: statistics.median(r["samples_per_s"] for r in rs) for n, rs in results.items()}
    rss = {n: statistics.median(r["peak_rss_gb"] for r in rs) for n, rs in results.items()}
    arithmetic = WEIGHTS[0] * rate["a"] + WEIGHTS[1] * rate["b"]
    harmonic = 1 / (WEIGHTS[0] / rate["a"] + WEIGHTS[1] / rate["b"])
    summary = {"samples_per_s": rate, "peak_rss_gb": rss, "weighted_mean_samples_per_s": round(arithmetic, 1),
               "weighted_harmonic_mean_samples_per_s": round(harmonic, 1),
               "mixture_vs_weighted_mean": round(rate["mixture"] / arithmetic, 3),
               "mixture_vs_weighted_harmonic_mean": round(rate["mixture"] / harmonic, 3),
               "mixture_rss_vs_sum": round(rss["mixture"] / (rss["a"] + rss["b"]), 3)}
    print(json.dumps(summary, indent=2))
    Path(args.out).write_text(json.dumps({"summary": summary, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
