"""Start-up at scale: from a fresh process to the first batch on datasets of many short episodes
(`scale_dataset.py`: 6-14 frames of one 64x64 camera per episode, 1000 episodes per data and video file, written
once into dl's cache folder), dl's `map` and `pool` loaders against LeRobot 0.4.4's `LeRobotDataset`, each size
in one run.

Every measurement is a fresh process (the child mode of this script; LeRobot's runs in the anchor venv,
/work/shared/anchors/lerobot/setup.sh) that builds the dataset, builds a DataLoader (batch 16, 2 workers,
shuffled) and takes its first batch. The parent watches the child's process tree with psutil (peak RSS of
the tree, `dl.bench.memory`) and takes its PSS once the first batch arrived. Each loader runs once untimed
first ("cold": LeRobot converts the parquet files to its Arrow cache, dl's `map` writes its tabular file),
then `--repeats` warm runs, interleaved across loaders; the table gives the median warm run and the cold
build. `--bucket` adds dl's loaders through the `bucket` source on a loopback S3 server (moto, behind a
counting proxy), with the requests the metadata took.

    .venv/bin/python benchmarks/scale.py --sizes 10000,100000,1000000 --anchor-python /tmp/anchor/venv/bin/python

Columns: `start s` from the process's creation (interpreter and imports included) to the first batch;
`build s` the dataset object (metadata included); `1st batch s` from iter(DataLoader) (worker start
included); `peak RSS MB` of the tree; `PSS MB` of the tree at the first batch. Growth is the least-squares
slope over the sizes, per 10k episodes.
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

HERE = Path(__file__).resolve().parent
LOADERS = ("lerobot", "dl-map", "dl-pool")
BATCH_SIZE, NUM_WORKERS = 16, 2


# ------------------------------------------------------------------------------------------ child (one run)
def child(loader: str, root: str, source_options: str | None) -> None:
    """Build `loader` on `root`, take one batch, print the timings as one JSON line, then wait for a line on
    stdin (the parent measures the tree's memory meanwhile) and exit."""
    import psutil
    import torch

    t0 = time.perf_counter()
    if loader == "lerobot":
        from lerobot.datasets.lerobot_dataset import LeRobotDataset

        dataset = LeRobotDataset("local/scale", root=root, video_backend="torchcodec")
        t1 = time.perf_counter()
        batches = torch.utils.data.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True, num_workers=NUM_WORKERS)
    else:
        import dl

        options = json.loads(source_options) if source_options else None
        source = "bucket" if options else "local"
        dataset = dl.make_dataset(root, loader=loader.removeprefix("dl-"), source=source, source_options=options)
        t1 = time.perf_counter()
        batches = dl.make_dataloader(dataset, batch_size=BATCH_SIZE, num_workers=NUM_WORKERS)
    t2 = time.perf_counter()
    batch = next(iter(batches))
    t3 = time.perf_counter()
    assert len(batch["index"]) == BATCH_SIZE
    since_start = time.time() - psutil.Process().create_time()
    print(json.dumps({"start_s": round(since_start, 3), "build_s": round(t1 - t0, 3),
                      "first_batch_s": round(t3 - t2, 3), "episodes": int(len(dataset.meta.episodes))}), flush=True)
    sys.stdin.readline()
    os._exit(0)  # leave without tearing down workers one by one: the measurement is over


# ------------------------------------------------------------------------------------------ parent
def measure(python: str, loader: str, root: str, env: dict, source_options: dict | None = None) -> dict:
    """One fresh child process: its JSON line, with the tree's peak RSS and PSS (MB) added."""
    import psutil

    from dl.bench.memory import PeakRssMonitor, tree_pss_bytes

    command = [python, str(Path(__file__).resolve()), "child", loader, root]
    if source_options:
        command += ["--source-options", json.dumps(source_options)]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        with PeakRssMonitor(period_s=0.05, root=psutil.Process(proc.pid)) as rss:
            line = proc.stdout.readline()
            pss = tree_pss_bytes(psutil.Process(proc.pid)) if line else 0
        if not line:
            raise RuntimeError(f"{loader} on {root} failed:\n{proc.stderr.read()[-3000:]}")
        proc.stdin.write("done\n")
        proc.stdin.flush()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return {**json.loads(line), "peak_rss_mb": round(rss.peak_bytes / 1e6), "pss_mb": round(pss / 1e6)}


def metadata_requests(url: str, storage_options: dict, proxy) -> dict:
    """Requests (counted by the proxy, on the wire) and seconds that reading the metadata through `bucket`
    takes in this process."""
    from dl.host.assembly import open_dataset

    before, t0 = proxy.requests, time.perf_counter()
    meta = open_dataset(url, "bucket", {"storage_options": storage_options})
    return {"metadata_requests": proxy.requests - before, "metadata_s": round(time.perf_counter() - t0, 3),
            "metadata_files": sum(1 for f in meta.files if f.startswith("meta/"))}


def slope_per_10k(sizes: list[int], values: list[float]) -> float:
    """Least-squares slope of `values` over `sizes`, per 10,000 episodes."""
    mx, my = statistics.fmean(sizes), statistics.fmean(values)
    sxx = sum((x - mx) ** 2 for x in sizes)
    return 1e4 * sum((x - mx) * (y - my) for x, y in zip(sizes, values, strict=True)) / sxx if sxx else 0.0


def run_size(args, size: int, env: dict, rows: list[dict]) -> None:
    from scale_dataset import scale_dataset

    t0 = time.perf_counter()
    root = scale_dataset(size)
    print(f"dataset {root} ready in {time.perf_counter() - t0:.1f} s", flush=True)
    pythons = {"lerobot": args.anchor_python, "dl-map": sys.executable, "dl-pool": sys.executable}
    loaders = [name for name in args.loaders.split(",") if pythons.get(name)]
    cold = {name: measure(pythons[name], name, str(root), env) for name in loaders}
    warm: dict[str, list[dict]] = {name: [] for name in loaders}
    for _ in range(args.repeats):
        for name in loaders:
            warm[name].append(measure(pythons[name], name, str(root), env))
    for name in loaders:
        rows.append(_row(size, name, warm[name], cold[name]))
    if args.bucket:
        rows.extend(_bucket_rows(args, root, size, env))


def _bucket_rows(args, root: Path, size: int, env: dict) -> list[dict]:
    from dl.testing.fault_proxy import FaultProxy
    from dl.testing.s3_server import S3Server

    out = []
    with S3Server() as s3:
        url = s3.upload(root, "scale", root.name)
        with FaultProxy(s3.endpoint_url) as proxy:
            storage = s3.storage_options(proxy.endpoint_url)
            requests = metadata_requests(url, storage, proxy)
            for name in ("dl-map", "dl-pool"):
                options = {"storage_options": storage}
                cold = measure(sys.executable, name, url, env, options)
                runs = [measure(sys.executable, name, url, env, options) for _ in range(args.repeats)]
                out.append({**_row(size, f"{name} (bucket)", runs, cold), **requests})
    return out


def _row(size: int, name: str, runs: list[dict], cold: dict | None) -> dict:
    keys = ("start_s", "build_s", "first_batch_s", "peak_rss_mb", "pss_mb")
    row = {"episodes": size, "loader": name, **{k: statistics.median(r[k] for r in runs) for k in keys},
           "runs": runs}
    if cold is not None:
        row["cold_build_s"] = cold["build_s"]
    print(json.dumps({k: v for k, v in row.items() if k != "runs"}), flush=True)
    return row


def report(rows: list[dict]) -> str:
    lines = ["| episodes | loader | start s | build s | 1st batch s | peak RSS MB | PSS MB | cold build s | "
             "metadata requests |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['episodes']:,} | {r['loader']} | {r['start_s']:.2f} | {r['build_s']:.2f} | "
                     f"{r['first_batch_s']:.2f} | {r['peak_rss_mb']} | {r['pss_mb']} | {r.get('cold_build_s', '-')} | "
                     f"{r.get('metadata_requests', '-')} |")
    sizes = sorted({r["episodes"] for r in rows})
    if len(sizes) > 1:
        lines += ["", "| loader | start s per 10k episodes | peak RSS MB per 10k episodes |", "|---|---|---|"]
        for name in dict.fromkeys(r["loader"] for r in rows):
            mine = sorted((r for r in rows if r["loader"] == name), key=lambda r: r["episodes"])
            xs = [r["episodes"] for r in mine]
            lines.append(f"| {name} | {slope_per_10k(xs, [r['start_s'] for r in mine]):.3f} | "
                         f"{slope_per_10k(xs, [r['peak_rss_mb'] for r in mine]):.1f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode")
    one = sub.add_parser("child", help="one measured run (used by the parent)")
    one.add_argument("loader", choices=LOADERS)
    one.add_argument("root")
    one.add_argument("--source-options")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="episodes per dataset, comma-separated")
    parser.add_argument("--loaders", default=",".join(LOADERS))
    parser.add_argument("--repeats", type=int, default=2, help="warm runs per loader and size [2]")
    parser.add_argument("--anchor-python", default=os.path.join(os.environ.get("ANCHOR_DIR", "/tmp/anchor"),
                                                                "venv/bin/python"),
                        help="the LeRobot anchor venv's python (setup.sh); LeRobot is skipped when it is missing")
    parser.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "dl-scale"),
                        help="the measured runs' dl cache and HF home (the datasets are in dl's cache folder)")
    parser.add_argument("--bucket", action="store_true", help="also through the bucket source (loopback S3)")
    parser.add_argument("--out", default="scale.json")
    args = parser.parse_args()
    if args.mode == "child":
        child(args.loader, args.root, args.source_options)
        return 0
    if not Path(args.anchor_python).exists():
        print(f"no LeRobot anchor at {args.anchor_python}: LeRobot is left out", file=sys.stderr)
        args.anchor_python = None
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "DL_CACHE_DIR": str(data / "dl-cache"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_HOME": str(data / "hf-home")}
    rows: list[dict] = []
    for size in [int(s) for s in args.sizes.split(",")]:
        run_size(args, size, env, rows)
    Path(args.out).write_text(json.dumps(rows, indent=2))
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
