"""Remote vs local throughput of one loader: the same `dl run` over a local folder, and over the `bucket`
(moto S3) and `hub` (dl's Hub API server) sources behind a fault proxy that adds latency per request and
caps bandwidth, all on loopback, runs interleaved so a noisy machine affects each configuration alike.

    .venv/bin/python benchmarks/remote_vs_local.py                    # open50, 43 episodes, 20 ms, 80 Mbit/s
    .venv/bin/python benchmarks/remote_vs_local.py --dataset layout   # LeRobot's real layout, generated
    .venv/bin/python benchmarks/remote_vs_local.py --repeats 3 --duration 60 --configs local,bucket
    .venv/bin/python benchmarks/remote_vs_local.py --latency-ms 100 --mbit 40   # a cross-region bucket
    .venv/bin/python benchmarks/remote_vs_local.py --loader-option decode_chunk_frames=12   # any loader option
    .venv/bin/python benchmarks/remote_vs_local.py --configs bucket,bucket-without-coalescing   # a mechanism off

`--dataset layout` generates (once, into dl's cache folder) a dataset with the layout LeRobot v3.0 writes:
10 episodes per video and data file, 2 cameras, AV1 GOP 2 at 640x480 (~6 KB per frame), one row group per data
file.

Each remote run starts with an empty host cache (a `cache_dir` of its own), so no run reads what an earlier one
fetched. Prints one line per run (with its samples per second from the DataLoader's start, `samples_per_bin`, its
decoded frames/s, peak memory of all its processes and the distinct episodes per batch, as `dl run` reports them) and
a summary per configuration (median samples/s and its ratio to local, first batch, bytes fetched / needed, and the
cores busy over each run: the servers and proxies, which run in this process and in
moto's own (`dl.testing.s3_server`), and the `dl run` with its workers), and writes every result to --out (JSON).
Issue 18's targets behind 20 ms / 80 Mbit/s: samples/s >= 0.9 of local, first batch <= 2 s, bytes fetched / needed
<= 1.1. A configuration `SOURCE-without-NAME[,NAME...]` runs SOURCE with those mechanisms off
(`benchmarks/mechanisms/sitecustomize.py` lists them).
"""

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil
from dl_runs import OPEN50, OPEN50_USABLE
from dl_runs import dl_run as run

from dl.kits.paths import cache_dir
from dl.testing.fault_proxy import FaultProxy
from dl.testing.hub_server import HubServer
from dl.testing.s3_server import S3Server
from dl.testing.synthetic import SyntheticConfig, write_synthetic_dataset

CONFIGS = ("local", "bucket", "bucket-noprefetch", "hub")
MECHANISMS = Path(__file__).with_name("mechanisms")
LAYOUT = SyntheticConfig(episodes=30, frames_per_episode=(240, 360), cameras=2, width=640, height=480, codec="av1",
                         gop=2, episodes_per_file=10, row_group_size=None, seed=18, texture=44)
"""LeRobot v3.0's real layout: many episodes per video and data file, one row group per data file; textured
frames at a robot camera's bitrate (~6 KB per frame, like open50), so fixed per-episode costs weigh as they would."""


def layout_dataset() -> Path:
    """The generated real-layout dataset (written once into dl's cache folder)."""
    root = cache_dir("benchmarks") / "remote_layout_v2"
    if not (root / "meta" / "info.json").is_file():
        print(f"generating {root} (once)...", flush=True)
        write_synthetic_dataset(root, LAYOUT)
    return root


def dl_run(args, out: Path, source_args: list[str]) -> dict:
    options = ["--loader", args.loader, "--episodes", args.episodes, "--batch-size", str(args.batch_size),
               "--num-workers", str(args.num_workers), "--duration", str(args.duration), *source_args]
    if args.loader == "pool":
        options += ["--loader-option", f"episode_pool_size={args.pool_size}"]
    for option in args.loader_option:
        options += ["--loader-option", option]
    return run(options, out, args.duration * 6 + 600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=("open50", "layout"), default="open50",
                        help="open50 (one episode per file), or the generated real layout (10 per file)")
    parser.add_argument("--root", default=None, help="another local dataset folder")
    parser.add_argument("--episodes", default=None, help="episodes to load [open50's usable ones; all]")
    parser.add_argument("--loader", default="pool")
    parser.add_argument("--pool-size", type=int, default=32)
    parser.add_argument("--loader-option", action="append", default=[], metavar="KEY=VALUE",
                        help="another option of the loader, as `dl run --loader-option` (repeatable)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--duration", type=float, default=30.0, help="steady window per run, s")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--latency-ms", type=float, default=20.0, help="added per request")
    parser.add_argument("--mbit", type=float, default=80.0, help="bandwidth cap, Mbit/s (all connections)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}")
    parser.add_argument("--out", default="remote_vs_local.json")
    args = parser.parse_args()
    configs = args.configs.split(",")
    root = Path(args.root or (OPEN50 if args.dataset == "open50" else layout_dataset())).resolve()
    if args.episodes is None:
        args.episodes = OPEN50_USABLE if root == OPEN50.resolve() else f"0-{LAYOUT.episodes - 1}"
    network = {"latency_s": args.latency_ms / 1e3, "bandwidth_bps": args.mbit * 1e6}
    rows = []
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(MECHANISMS), os.environ.get("PYTHONPATH")]))
    with S3Server() as s3, HubServer() as hub, tempfile.TemporaryDirectory() as tmp:
        url = s3.upload(root, "bench", root.name)
        hub.add_revision(f"bench/{root.name}", root)
        with FaultProxy(s3.endpoint_url, **network) as s3_proxy, FaultProxy(hub.endpoint, **network) as hub_proxy:
            endpoint = f"endpoint_url={s3_proxy.endpoint_url}"
            sources = {
                "local": ["--root", str(root)],
                "bucket": ["--source", "bucket", "--root", url, "--storage-option", endpoint,
                           "--storage-option", "key=testing", "--storage-option", "secret=testing"],
                "hub": ["--source", "hub", "--repo-id", f"bench/{root.name}", "--revision", "main",
                        "--storage-option", f"endpoint={hub_proxy.endpoint_url}"],
            }
            sources["bucket-noprefetch"] = [*sources["bucket"], "--source-option", "prefetch=false"]
            for repeat in range(args.repeats):
                for config in configs:
                    base, _, without = config.partition("-without-")
                    os.environ["DL_BENCH_WITHOUT"] = without  # read by the sitecustomize on the runs' PYTHONPATH
                    cpu = _cpu_s(s3.pid)
                    fresh = [] if config == "local" else ["--source-option", f"cache_dir={tmp}/{config}-{repeat}-cache"]
                    result = dl_run(args, Path(tmp) / f"{config}-{repeat}", sources[base] + fresh)
                    server_s, run_s, wall_s = (b - a for a, b in zip(cpu, _cpu_s(s3.pid), strict=True))
                    row = {"config": config, "repeat": repeat, "status": result.get("status"),
                           "samples_per_s": result.get("samples_per_s"),
                           "decoded_frames_per_s": result.get("decoded_frames_per_s"),
                           "peak_rss_gb": result.get("peak_rss_gb"),
                           "shuffle_randomness_frac": result.get("shuffle_randomness_frac"),
                           "first_batch_s": result.get("first_batch_latency_s"),
                           "server_cpu_s": round(server_s, 2), "run_cpu_s": round(run_s, 2), "wall_s": round(wall_s, 2),
                           "source_stats": result.get("source_stats"), "error": result.get("error"),
                           "samples_per_bin": (result.get("throughput_timeline") or {}).get("samples_per_bin")}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    summary = {}
    for config in configs:
        ok = [r for r in rows if r["config"] == config and r["status"] == "ok"]
        stats = [r["source_stats"] or {} for r in ok]
        summary[config] = {"median_samples_per_s": _median([r["samples_per_s"] for r in ok]),
                           "runs": [r["samples_per_s"] for r in ok],
                           "median_first_batch_s": _median([r["first_batch_s"] for r in ok]),
                           "median_read_amplification": _median([s.get("read_amplification") for s in stats]),
                           "metadata_s": _median([s.get("metadata_s") for s in stats]),
                           "median_server_cpu_share": _median([r["server_cpu_s"] / r["wall_s"] for r in ok]),
                           "median_run_cpu_share": _median([r["run_cpu_s"] / r["wall_s"] for r in ok])}
    local = summary.get("local", {}).get("median_samples_per_s")
    for config, s in summary.items():
        rate = s["median_samples_per_s"]
        s["ratio_to_local"] = round(rate / local, 3) if local and rate else None
        print(f"{config:>18}: median {_round(rate)} samples/s over {s['runs']}; vs local {s['ratio_to_local']}; first "
              f"batch {_round(s['median_first_batch_s'])} s (metadata {_round(s['metadata_s'])} s on the host); "
              f"fetched / needed {_round(s['median_read_amplification'])}; cores busy: "
              f"server and proxy {_round(s['median_server_cpu_share'])}, dl run {_round(s['median_run_cpu_share'])}")
    Path(args.out).write_text(json.dumps({"args": vars(args), "runs": rows, "summary": summary}, indent=2))
    return 0


def _cpu_s(s3_pid: int) -> tuple[float, float, float]:
    """(CPU seconds of the servers and proxies: this process and moto's (`s3_pid`), CPU seconds of finished child
    processes: the `dl run`s and their DataLoader workers, wall seconds)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    moto = psutil.Process(s3_pid).cpu_times()
    return (own.ru_utime + own.ru_stime + moto.user + moto.system, children.ru_utime + children.ru_stime,
            time.perf_counter())


def _round(value):
    return None if value is None else round(value, 2)


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


if __name__ == "__main__":
    sys.exit(main())
