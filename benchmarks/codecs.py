"""What a codec choice buys: one dataset re-encoded by `dl transcode` into several codec/GOP variants (default: AV1
GOP 2, LeRobot's recording format; H.264 GOP 2 and 12; HEVC GOP 2), then per variant the machine's CPU decode
ceilings (random single frames and whole episodes in order, measured by `dl run` in its 2 DataLoader workers at
once) and `dl run`'s `map` and `pool` samples/s (batch 16, float32, 2 workers), runs interleaved across variants.

    /work/bin/shared-cpu .venv/bin/python benchmarks/codecs.py --prepare-only     # encode once (minutes), untimed
    /work/bin/exclusive-cpu .venv/bin/python benchmarks/codecs.py --duration 10  # measure
    .venv/bin/python benchmarks/codecs.py --root DATASET --episodes 0-9 --variants h264:2,h264:24:veryfast

Variants are CODEC:GOP[:PRESET]; the transcoded datasets are kept under --work (re-running reuses them, and an
interrupted encode resumes). Writes every run to --out (JSON) and prints one table.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dl_runs import DL, OPEN50, OPEN50_USABLE, dl_run

VARIANTS = "av1:2,h264:2,h264:12,hevc:2"
FAST_PRESETS = {"av1": "12", "h264": "fast", "hevc": "ultrafast"}
"""Encoder presets used unless a variant names one: fast encodes of open50's 17,108 frames on 2 cores (AV1 12 is
SVT-AV1's fastest; x265's slower presets take minutes per GOP-2 file here)."""


def parse_variant(text: str) -> tuple[str, int, str]:
    codec, gop, *preset = text.split(":")
    return codec, int(gop), preset[0] if preset else FAST_PRESETS[codec]


def prepare(root: Path, work: Path, variant: str) -> Path:
    """The variant's dataset under `work` (made with `dl transcode` when missing; an interrupted one resumes)."""
    codec, gop, preset = parse_variant(variant)
    dst = work / f"{root.name}-{codec}-g{gop}-{preset}"
    if not (dst / "meta" / "info.json").is_file():
        print(f"transcoding {root} -> {dst}", flush=True)
        subprocess.run([DL, "transcode", str(root), str(dst), "--codec", codec, "--gop", str(gop), "--preset", preset,
                        "--allow-missing", "--min-psnr", "25"], check=True)
    return dst


def facts(dst: Path) -> dict:
    """Size, PSNR and encode time from the variant's `meta/dl_transcode.json`."""
    record = json.loads((dst / "meta" / "dl_transcode.json").read_text())
    files = record["files"].values()
    psnrs = [f["psnr_db"] for f in files if f["psnr_db"] is not None]
    return {"video_mb": round(sum(f["size"] for f in files) / 1e6, 1),
            "source_video_mb": round(sum(f["original_size"] for f in files) / 1e6, 1),
            "psnr_db_mean": round(statistics.mean(psnrs), 2) if psnrs else None,
            "psnr_db_lowest": round(min(psnrs), 2) if psnrs else None,
            "encode_s": round(sum(f["encode_s"] for f in files), 1)}


def run(dst: Path, loader: str, args, out: Path) -> dict:
    options = ["--root", str(dst), "--loader", loader, "--batch-size", "16", "--num-workers", str(args.workers),
               "--duration", str(args.duration)]
    options += ["--episodes", args.episodes] if args.episodes else []
    result = dl_run(options, out, args.duration * 10 + 300)
    ceiling = result.get("decode_ceiling") or {}
    return {"status": result.get("status"), "error": result.get("error"),
            "samples_per_s": result.get("samples_per_s"), "spread_pct": result.get("samples_per_s_spread_pct"),
            "pct_random": result.get("decoded_frames_pct_of_random_ceiling"),
            "pct_sequential": result.get("decoded_frames_pct_of_sequential_ceiling"),
            "random_ceiling": ceiling.get("random_frames_per_s"),
            "sequential_ceiling": ceiling.get("sequential_frames_per_s"),
            "single_proc_samples_per_s": result.get("single_proc_samples_per_s")}


def median_of(rows: list[dict], key: str):
    values = [r[key] for r in rows if r.get("status") == "ok" and r.get(key) is not None]
    return round(statistics.median(values), 1) if values else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=str(OPEN50), help="the dataset to re-encode [open50]")
    parser.add_argument("--episodes", default=None, help="episodes to run on [open50's usable ones for open50]")
    parser.add_argument("--variants", default=VARIANTS, help=f"CODEC:GOP[:PRESET], comma-separated [{VARIANTS}]")
    parser.add_argument("--work", default=f"{tempfile.gettempdir()}/dl-codecs", help="where the variants are kept")
    parser.add_argument("--duration", type=float, default=10.0, help="steady window per run, s")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--prepare-only", action="store_true", help="encode the variants, measure nothing")
    parser.add_argument("--out", default="codecs.json")
    args = parser.parse_args()
    root = Path(args.root)
    if args.episodes is None and root.resolve() == OPEN50.resolve():
        args.episodes = OPEN50_USABLE
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    variants = args.variants.split(",")
    roots = {v: prepare(root, work, v) for v in variants}
    if args.prepare_only:
        return 0
    rows: dict[tuple[str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for variant in variants:
                for loader in ("map", "pool"):
                    t0 = time.perf_counter()
                    row = run(roots[variant], loader, args, Path(tmp) / f"{variant}-{loader}-{repeat}")
                    rows.setdefault((variant, loader), []).append(row)
                    print(json.dumps({"variant": variant, "loader": loader, "repeat": repeat,
                                      "seconds": round(time.perf_counter() - t0, 1), **row}), flush=True)
    table = []
    for variant in variants:
        m, p = rows[(variant, "map")], rows[(variant, "pool")]
        table.append({"variant": variant, **facts(roots[variant]),
                      "random_ceiling": median_of(m + p, "random_ceiling"),
                      "sequential_ceiling": median_of(m + p, "sequential_ceiling"),
                      "map_samples_per_s": median_of(m, "samples_per_s"), "map_pct_random": median_of(m, "pct_random"),
                      "pool_samples_per_s": median_of(p, "samples_per_s"),
                      "pool_pct_sequential": median_of(p, "pct_sequential")})
    print(f"\n{root} ({args.episodes or 'all episodes'}), batch 16, float32, {args.workers} workers, "
          f"{args.duration:g} s windows, medians of {args.repeats}; ceilings: frames/s of {args.workers} processes "
          "decoding at once")
    print("| variant | video MB | PSNR dB (lowest file) | random ceiling | in-order ceiling | map samples/s "
          "(% of random) | pool samples/s (% of in-order) |")
    print("|---|---|---|---|---|---|---|")
    for t in table:
        print(f"| {t['variant']} | {t['video_mb']} | {t['psnr_db_mean']} ({t['psnr_db_lowest']}) | "
              f"{t['random_ceiling']} | {t['sequential_ceiling']} | {t['map_samples_per_s']} ({t['map_pct_random']}%) "
              f"| {t['pool_samples_per_s']} ({t['pool_pct_sequential']}%) |")
    Path(args.out).write_text(json.dumps({"args": vars(args), "table": table,
                                          "runs": {f"{v}/{loader}": r for (v, loader), r in rows.items()}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
