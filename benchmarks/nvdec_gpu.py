"""NVDEC on a real GPU, in one script: the nvdec tests and decoder suite, CPU against NVDEC decode speed (random
single frames and whole episodes in order) on H.264 and HEVC made by `dl transcode` (and AV1, which A100/H100-class
NVDEC cannot decode: the clear error is the expected result there), `dl run` map and pool with `--decoder nvdec`
and spawned workers, GPU memory, and how many processes decoding at once saturate the NVDEC engines.

Set up on the GPU machine (CUDA builds of torch and torchcodec matching its driver, FFmpeg with libsvtav1, libx264
and libx265 for the datasets), then run:

    python3 -m venv .venv && .venv/bin/pip install torch torchcodec --index-url https://download.pytorch.org/whl/cu126
    .venv/bin/pip install -e ".[test]"
    .venv/bin/python benchmarks/nvdec_gpu.py --out nvdec_gpu.json          # ~10 minutes
    .venv/bin/python benchmarks/nvdec_gpu.py --root DATASET                  # a real dataset as the source

On a GPU machine with torch >= 2.11 for CUDA 13 and no network (torchcodec and FFmpeg missing), carry what
`benchmarks/offline_gpu/bundle.sh` makes and run `benchmarks/offline_gpu/run.sh` there: PyPI's torchcodec wheels
from 0.14 on are CUDA 13 builds on torch's stable ABI.

Without a usable GPU it says why and exits 2 before doing anything; `--cpu-only` then runs the CPU half (the
datasets, the CPU rates and runs) to check the script itself, and `--datasets-only` makes the datasets and stops.
Every section records its error and the script goes on, so one failure does not hide the rest; the exit status is
1 when any section failed.
"""

import argparse
import json
import multiprocessing
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DL = str(Path(sys.executable).with_name("dl"))
SYNTHETIC = {"episodes": "12", "frames": "300-400", "cameras": "2", "size": "640x480", "codec": "av1", "gop": "2",
             "episodes-per-file": "4"}
"""The source made when no --root is given: LeRobot's recording format (AV1, GOP 2), two 640x480 cameras."""
PROCESSES = "1,2,4,8,16"


def gpu_problems() -> list[str]:
    """Why nvdec cannot run here (`dl.plugins.nvdec_decoder.cuda_problems`); empty when it can."""
    from dl.plugins.nvdec_decoder import cuda_problems

    return cuda_problems()


def environment() -> dict:
    import torch

    found = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
             "torchcodec": version("torchcodec"), "dl": version("dl"), "node": platform.node(),
             "ffmpeg": subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True).stdout.split("\n")[0]}
    if torch.cuda.is_available():
        found["gpu"] = torch.cuda.get_device_name(0)
        found["gpu_capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
    if shutil.which("nvidia-smi"):
        found["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                              "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    return found


class GpuSampler:
    """`nvidia-smi` sampled every 0.2 s while a section runs: the peak memory used on GPU 0 (MiB) and the peak and
    mean NVDEC utilization (%)."""

    def __init__(self):
        self.memory, self.decoder, self._stop = [], [], threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        query = ["nvidia-smi", "--query-gpu=memory.used,utilization.decoder", "--format=csv,noheader,nounits",
                 "--id=0"]
        while not self._stop.wait(0.2):
            out = subprocess.run(query, capture_output=True, text=True, timeout=10).stdout.strip().split(",")
            if len(out) == 2 and all(v.strip().isdigit() for v in out):
                self.memory.append(int(out[0]))
                self.decoder.append(int(out[1]))

    def __enter__(self):
        if shutil.which("nvidia-smi"):
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def summary(self) -> dict:
        if not self.memory:
            return {}
        return {"gpu_memory_used_mib_peak": max(self.memory), "nvdec_utilization_pct_peak": max(self.decoder),
                "nvdec_utilization_pct_mean": round(sum(self.decoder) / len(self.decoder), 1)}


def section(report: dict, name: str, save: Path):
    """Decorator-free section runner: `with section(report, name, save) as out:` records the body's figures in
    `report[name]`, or its error and traceback, goes on, and writes the report so far to `save` (a run cut short by
    a time limit keeps the sections it finished)."""

    class _Section:
        def __enter__(self):
            print(f"== {name}", flush=True)
            report[name] = {}
            self.t0 = time.perf_counter()
            return report[name]

        def __exit__(self, kind, exc, tb):
            report[name]["seconds"] = round(time.perf_counter() - self.t0, 1)
            if exc is not None and not isinstance(exc, KeyboardInterrupt):
                report[name]["error"] = f"{type(exc).__name__}: {exc}"
                report[name]["traceback"] = traceback.format_exc()
                print(f"   failed: {report[name]['error']}", flush=True)
            save.write_text(json.dumps(report, indent=2))
            return exc is not None and not isinstance(exc, KeyboardInterrupt)

    return _Section()


def run_tests(out: dict) -> None:
    # the decoder suites, and the tests whose expectations change where a GPU is present
    tests = ["tests/test_nvdec.py", "tests/test_conformance_decoders.py", "tests/test_codec_fixes.py",
             "tests/test_cli_decode.py", "tests/test_dataloader_needs.py", "tests/test_diagnose.py",
             "tests/test_plugins.py"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *tests],
                          cwd=REPO, capture_output=True, text=True, timeout=3600)
    out.update(exit_status=done.returncode, summary=done.stdout.strip().splitlines()[-1:],
               skipped=[line for line in done.stdout.splitlines() if line.startswith("SKIPPED")],
               failures=[line for line in done.stdout.splitlines() if line.startswith("FAILED")])
    if done.returncode != 0:
        out["output_tail"] = done.stdout[-6000:] + done.stderr[-2000:]
        raise RuntimeError(f"pytest exited {done.returncode}: {out['summary']}")


def make_datasets(work: Path, root: str | None) -> dict[str, Path]:
    """The source (given, or LeRobot's format generated) and its H.264 and HEVC GOP-2 transcodes."""
    source = Path(root) if root else work / "av1-g2"
    if root is None and not (source / "meta" / "info.json").is_file():
        flags = [f"--{k}={v}" for k, v in SYNTHETIC.items()]
        subprocess.run([DL, "synthetic-dataset", str(source), *flags], check=True)
    found = {"source": source}
    for codec in ("h264", "hevc", "av1"):
        dst = work / f"{source.name}-{codec}-g2"
        if not (dst / "meta" / "info.json").is_file():
            preset = {"h264": "fast", "hevc": "fast", "av1": "10"}[codec]
            subprocess.run([DL, "transcode", str(source), str(dst), "--codec", codec, "--gop", "2", "--preset",
                            preset, "--allow-missing"], check=True)
        found[codec] = dst
    return found


def decode_rates(root: Path, decoder: str, seconds: float) -> dict:
    """Random and in-order frames/s of one process (`dl.bench.ceiling`: best of its trials), or the decoder's
    error (for nvdec on AV1 without an AV1 NVDEC: `CodecUnsupportedError`, the expected answer on A100/H100)."""
    from dl.bench.ceiling import TRIALS, CeilingPlan, measure_trials, spread_pct
    from dl.contracts.errors import CodecUnsupportedError, DlError
    from dl.host.assembly import build_decoder, open_dataset

    meta = open_dataset(str(root))
    episodes = [e for e in meta.episodes.values() if not meta.missing_files([e])][:16]
    try:
        dec = build_decoder(decoder)
        trials = measure_trials(meta, dec, episodes, CeilingPlan(trial_s=seconds / TRIALS))
    except CodecUnsupportedError as exc:
        return {"codec_unsupported": str(exc), "fix": exc.fix}
    except DlError as exc:
        return {"error": str(exc)}
    out = {f"{kind}_frames_per_s": round(max(rates), 1) for kind, rates in trials.items()}
    out.update({f"{kind}_spread_pct": spread_pct(rates) for kind, rates in trials.items()})
    if decoder == "nvdec":
        import torch

        out["torch_cuda_max_memory_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return out


def _saturate_one(args) -> float:
    root, seconds, seed = args
    from dl.bench.ceiling import CeilingPlan, measure_trials
    from dl.host.assembly import build_decoder, open_dataset

    meta = open_dataset(str(root))
    episodes = [e for e in meta.episodes.values() if not meta.missing_files([e])]
    trials = measure_trials(meta, build_decoder("nvdec"), episodes, CeilingPlan(trial_s=seconds, trials=1, seed=seed))
    return trials["sequential"][0]


def saturation(root: Path, counts: list[int], seconds: float) -> dict:
    """Total in-order NVDEC frames/s of N processes decoding at once (spawned: a CUDA context per process), with
    nvidia-smi's decoder utilization, for each N."""
    out = {}
    context = multiprocessing.get_context("spawn")
    for n in counts:
        with GpuSampler() as gpu, context.Pool(n) as pool:
            rates = pool.map(_saturate_one, [(root, seconds, i) for i in range(n)])
        out[str(n)] = {"frames_per_s_total": round(sum(rates), 1), "per_process": [round(r, 1) for r in rates],
                       **gpu.summary()}
        print(f"   {n} process(es): {out[str(n)]}", flush=True)
    return out


def dl_runs(root: Path, decoder: str, args, work: Path) -> dict:
    """`dl run` map and pool, 0 and 2 workers, with `decoder`: samples/s, shares of its ceiling, peak RSS, and
    nvidia-smi's peak GPU memory and NVDEC utilization during each invocation."""
    out = {}
    for loader in ("map", "pool"):
        folder = work / f"runs-{root.name}-{decoder}-{loader}"
        shutil.rmtree(folder, ignore_errors=True)
        command = [DL, "run", "--root", str(root), "--loader", loader, "--decoder", decoder, "--num-workers", "0,2",
                   "--batch-size", "16", "--duration", str(args.duration), "--out-dir", str(folder)]
        with GpuSampler() as gpu:
            done = subprocess.run(command, capture_output=True, text=True, timeout=args.duration * 20 + 600)
        for path in sorted(folder.glob("*.json")):
            r = json.loads(path.read_text())
            ceiling = r.get("decode_ceiling") or {}
            out[r["name"]] = {k: r.get(k) for k in ("status", "error", "samples_per_s", "samples_per_s_spread_pct",
                                                    "decoded_frames_pct_of_random_ceiling",
                                                    "decoded_frames_pct_of_sequential_ceiling",
                                                    "single_proc_samples_per_s", "peak_rss_gb",
                                                    "first_batch_latency_s")}
            out[r["name"]].update(random_ceiling=ceiling.get("random_frames_per_s"),
                                  sequential_ceiling=ceiling.get("sequential_frames_per_s"),
                                  multiprocessing_context=(r.get("dataloader") or {}).get("multiprocessing_context"))
        out[f"{loader}-gpu"] = gpu.summary()
        if done.returncode != 0:
            out[f"{loader}-stderr"] = done.stderr[-3000:]
    return out


def summary(report: dict) -> str:
    lines = [f"# NVDEC on {report['environment'].get('gpu', 'no GPU')}", "",
             f"versions: {json.dumps(report['environment'])}", "",
             "| dataset | decoder | random frames/s | in-order frames/s |", "|---|---|---|---|"]
    for name, rates in report.get("decode", {}).items():
        if not isinstance(rates, dict) or name == "seconds":
            continue
        for decoder, r in rates.items():
            value = r.get("codec_unsupported") or r.get("error")
            lines.append(f"| {name} | {decoder} | {value or r.get('random_frames_per_s')} | "
                         f"{'' if value else r.get('sequential_frames_per_s')} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", help="source dataset [a generated AV1 GOP-2 640x480 two-camera dataset]")
    parser.add_argument("--work", default=f"{tempfile.gettempdir()}/dl-nvdec", help="datasets and run folders")
    parser.add_argument("--seconds", type=float, default=4.0, help="decode timing per kind and decoder, s")
    parser.add_argument("--duration", type=float, default=10.0, help="dl run's steady window, s")
    parser.add_argument("--processes", default=PROCESSES, help=f"NVDEC saturation: processes at once [{PROCESSES}]")
    parser.add_argument("--run-codecs", default="h264,hevc", help="the datasets `dl run` runs on [h264,hevc]")
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--cpu-only", action="store_true", help="without a GPU: run the CPU half only")
    parser.add_argument("--datasets-only", action="store_true", help="make the datasets in --work and stop")
    parser.add_argument("--out", default="nvdec_gpu.json")
    args = parser.parse_args()
    if args.datasets_only:
        for name, root in make_datasets(Path(args.work), args.root).items():
            print(f"{name}: {root}")
        return 0
    problems = gpu_problems()
    if problems and not args.cpu_only:
        print("no GPU that nvdec can use here: " + "; ".join(problems) + ". Run this on a machine with an NVIDIA "
              "GPU, its driver, and CUDA builds of torch and torchcodec (see this script's docstring); --cpu-only "
              "checks the rest of the script without one.", file=sys.stderr)
        return 2
    decoders = ["cpu"] if problems else ["cpu", "nvdec"]
    work, out_path = Path(args.work), Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    report: dict = {"environment": environment(), "args": vars(args), "gpu_problems": problems}
    if not args.skip_tests and not problems:
        with section(report, "tests", out_path) as out:
            run_tests(out)
    datasets = {}
    with section(report, "datasets", out_path) as out:
        datasets = make_datasets(work, args.root)
        out.update({k: str(v) for k, v in datasets.items()})
    with section(report, "decode", out_path) as out:
        for codec in ("h264", "hevc", "av1"):
            if codec in datasets:
                out[codec] = {d: decode_rates(datasets[codec], d, args.seconds) for d in decoders}
                print(f"   {codec}: {out[codec]}", flush=True)
    if "nvdec" in decoders and "h264" in datasets:
        with section(report, "saturation", out_path) as out:
            out.update(saturation(datasets["h264"], [int(n) for n in args.processes.split(",")], args.seconds))
    for decoder in decoders:
        for codec in args.run_codecs.split(","):
            if codec in datasets:
                with section(report, f"dl run {codec} {decoder}", out_path) as out:
                    out.update(dl_runs(datasets[codec], decoder, args, work))
    out_path.write_text(json.dumps(report, indent=2))
    print(summary(report))
    print(f"\nwritten: {os.path.abspath(args.out)}")
    failed = [name for name, s in report.items() if isinstance(s, dict) and "error" in s]
    if failed:
        print(f"sections that failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
