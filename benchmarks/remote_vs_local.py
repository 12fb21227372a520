"""Remote vs local throughput of one loader: the same `dl run` over a local folder, and over the `bucket`
(moto S3) and `hub` (dl's Hub API server) sources behind a fault proxy that adds latency per request and
caps bandwidth, all on loopback, runs interleaved so a noisy machine affects each configuration alike.

    .venv/bin/python benchmarks/remote_vs_local.py                    # open50, 43 episodes, 20 ms, 80 Mbit/s
    .venv/bin/python benchmarks/remote_vs_local.py --repeats 3 --duration 60 --configs local,bucket

Prints one line per run and a summary (median samples/s per configuration and its ratio to local), and
writes every result to --out (JSON). Issue 5/7's target: `bucket` with prefetch >= 80% of `local`.
"""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from dl_runs import OPEN50, OPEN50_USABLE
from dl_runs import dl_run as run

from dl.testing.fault_proxy import FaultProxy
from dl.testing.hub_server import HubServer
from dl.testing.s3_server import S3Server

CONFIGS = ("local", "bucket", "bucket-noprefetch", "hub")


def dl_run(args, out: Path, source_args: list[str]) -> dict:
    options = ["--loader", args.loader, "--episodes", args.episodes, "--batch-size", str(args.batch_size),
               "--num-workers", str(args.num_workers), "--duration", str(args.duration), *source_args]
    if args.loader == "pool":
        options += ["--loader-option", f"episode_pool_size={args.pool_size}"]
    return run(options, out, args.duration * 6 + 600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=str(OPEN50), help="local dataset folder [open50]")
    parser.add_argument("--episodes", default=OPEN50_USABLE)
    parser.add_argument("--loader", default="pool")
    parser.add_argument("--pool-size", type=int, default=32)
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
    root = Path(args.root).resolve()
    network = {"latency_s": args.latency_ms / 1e3, "bandwidth_bps": args.mbit * 1e6}
    rows = []
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
                    result = dl_run(args, Path(tmp) / f"{config}-{repeat}", sources[config])
                    row = {"config": config, "repeat": repeat, "status": result.get("status"),
                           "samples_per_s": result.get("samples_per_s"), "source_stats": result.get("source_stats"),
                           "error": result.get("error")}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    summary = {}
    for config in configs:
        rates = [r["samples_per_s"] for r in rows if r["config"] == config and r["status"] == "ok"]
        summary[config] = {"median_samples_per_s": statistics.median(rates) if rates else None, "runs": rates}
    local = summary.get("local", {}).get("median_samples_per_s")
    for config, s in summary.items():
        rate = s["median_samples_per_s"]
        s["ratio_to_local"] = round(rate / local, 3) if local and rate else None
        print(f"{config:>18}: median {s['median_samples_per_s']} samples/s over {s['runs']}; vs local "
              f"{s['ratio_to_local']}")
    Path(args.out).write_text(json.dumps({"args": vars(args), "runs": rows, "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
