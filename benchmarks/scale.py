"""Start-up at scale: from a fresh process to the first batch on datasets of many short episodes
(`scale_dataset.py`: 6-14 frames of one 64x64 camera per episode, 1000 episodes per data and video file, written
once into dl's cache folder), dl's `map` and `pool` loaders against LeRobot 0.4.4's and 0.6.1's `LeRobotDataset`,
each size in one run; with `--mix N`, a mixture of N generated datasets of different sizes whose features are named
as different labs name them (`scale_dataset.scale_mixture`), renamed to one set by `dl.make_mixture`.

Every measurement is a fresh process (the child mode of this script; LeRobot's runs in the anchor venv,
/work/shared/anchors/lerobot/setup.sh) that builds the dataset, builds a DataLoader (batch 16, 2 workers,
shuffled) and takes its first batch. The parent watches the child's process tree with psutil (peak RSS of
the tree, `dl.bench.memory`) and takes its PSS once the first batch arrived. Each loader runs once untimed
first ("cold": LeRobot converts the parquet files to its Arrow cache, dl's `map` writes its tabular file),
then `--repeats` warm runs, interleaved across loaders; the table gives the median warm run and the cold
build. `--bucket` adds dl's loaders through the `bucket` source on a loopback S3 server (moto), `--hub` through the
`hub` source on dl.testing's loopback Hub (its LFS files redirected to its CDN), each behind a counting proxy adding
`--latency-ms` to every request, with the requests and bytes the metadata took (read in the parent) and the bytes
each run fetched (the median run; the map fetches every selected episode before its first batch).

    .venv/bin/python benchmarks/scale.py --sizes 10000,100000,1000000 --anchor-python /tmp/anchor/venv/bin/python
    .venv/bin/python benchmarks/scale.py --sizes 1000000 --mix 50 --bucket --hub --repeats 3

Columns: `start s` from the process's creation (interpreter and imports included) to the first batch;
`build s` the dataset object (metadata included); `1st batch s` from iter(DataLoader) (worker start
included); `peak RSS MB` of the tree; `PSS MB` of the tree at the first batch; `target` whether the row meets issue
68's target (`TARGETS`: dl at 1M episodes locally and through `bucket` and `hub`, the mixture). Growth is the
least-squares slope over the sizes, per 10k episodes. A LeRobot run that has not reached its first batch after
`--lerobot-cap-s` (30 minutes) is stopped and shows `gave up after S s`.
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
LOADERS = ("lerobot", "lerobot-0.6", "dl-map", "dl-pool")
MIX_LOADER = "dl-mix"
SELECTIONS = ("every100", "first1pct")
"""`--selections`: 1% of the episodes, every 100th (every file touched) or the first 1% (one file in 100)."""
"""The child mode's name for a mixture: its root is a JSON file of `scale_mixture`'s members."""
BATCH_SIZE, NUM_WORKERS = 16, 2
TARGETS = {"local": (30.0, 3000), "remote": (60.0, None), "mix": (20.0, 3000)}
"""Issue 68's targets, (start s, peak RSS MB or None): dl's loaders on 1,000,000 episodes locally and through
`bucket` or `hub` (loopback servers at `--latency-ms`), and the `--mix` mixture."""


# ------------------------------------------------------------------------------------------ child (one run)
def child(loader: str, root: str, source: str, source_options: str | None) -> None:
    """Build `loader` on `root`, take one batch, print the timings as one JSON line, then wait for a line on
    stdin (the parent measures the tree's memory meanwhile) and exit."""
    import psutil
    import torch

    t0 = time.perf_counter()
    if loader.startswith("lerobot"):
        from lerobot.datasets.lerobot_dataset import LeRobotDataset

        dataset = LeRobotDataset("local/scale", root=root, video_backend="torchcodec")
        t1 = time.perf_counter()
        batches = torch.utils.data.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True, num_workers=NUM_WORKERS)
        episodes = len(dataset.meta.episodes)
    elif loader == MIX_LOADER:
        import dl

        members = json.loads(Path(root).read_text())
        loaders = [dl.make_dataset(m["root"], loader="map") for m in members]
        dataset = dl.make_mixture(loaders, "frames", rename=[m["rename"] for m in members])
        t1 = time.perf_counter()
        batches = dl.make_dataloader(dataset, batch_size=BATCH_SIZE, num_workers=NUM_WORKERS)
        episodes = sum(len(m.episodes) for m in loaders)
    else:
        import dl

        options = json.loads(source_options) if source_options else None
        loader, _, selection = loader.partition("@")
        config = {"episodes": selected(root, selection)} if selection else {}
        dataset = dl.make_dataset(root, loader=loader.removeprefix("dl-"), source=source, source_options=options,
                                  **config)
        t1 = time.perf_counter()
        batches = dl.make_dataloader(dataset, batch_size=BATCH_SIZE, num_workers=NUM_WORKERS)
        episodes = len(dataset.meta.episodes)
    t2 = time.perf_counter()
    batch = next(iter(batches))
    t3 = time.perf_counter()
    assert len(batch["index"]) == BATCH_SIZE
    since_start = time.time() - psutil.Process().create_time()
    print(json.dumps({"start_s": round(since_start, 3), "build_s": round(t1 - t0, 3),
                      "first_batch_s": round(t3 - t2, 3), "episodes": int(episodes)}), flush=True)
    sys.stdin.readline()
    os._exit(0)  # leave without tearing down workers one by one: the measurement is over


def selected(root: str, selection: str) -> list[int]:
    """The episodes a `--selections` entry names: `every100` (1%, every file touched), `first1pct` (the first 1%)."""
    total = json.loads((Path(root) / "meta" / "info.json").read_text())["total_episodes"]
    if selection not in SELECTIONS:
        raise SystemExit(f"unknown selection {selection!r}: one of {', '.join(SELECTIONS)}")
    return list(range(0, total, 100)) if selection == "every100" else list(range(total // 100))


# ------------------------------------------------------------------------------------------ parent
def measure(python: str, loader: str, root: str, env: dict, source: str = "local",
            source_options: dict | None = None, cap_s: float | None = None) -> dict:
    """One fresh child process: its JSON line, with the tree's peak RSS and PSS (MB) added; `{"gave_up_s": cap_s}`
    when it printed nothing within `cap_s` seconds (it is then killed, its workers with it)."""
    import select

    import psutil

    from dl.bench.memory import PeakRssMonitor, tree_pss_bytes

    command = [python, str(Path(__file__).resolve()), "child", loader, root, "--source", source]
    if source_options:
        command += ["--source-options", json.dumps(source_options)]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        with PeakRssMonitor(period_s=0.05, root=psutil.Process(proc.pid)) as rss:
            ready = cap_s is None or bool(select.select([proc.stdout], [], [], cap_s)[0])
            line = proc.stdout.readline() if ready else ""
            pss = tree_pss_bytes(psutil.Process(proc.pid)) if line else 0
        if not ready:  # killed once the monitor stopped watching the tree
            _kill_tree(proc)
            return {"gave_up_s": cap_s, "peak_rss_mb": round(rss.peak_bytes / 1e6)}
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


def _kill_tree(proc) -> None:
    """Kill `proc` (a child run) and every process under it."""
    import psutil

    for process in [*psutil.Process(proc.pid).children(recursive=True), psutil.Process(proc.pid)]:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    proc.wait()


def metadata_requests(root: str, source: str, storage_options: dict, proxy) -> dict:
    """Requests (counted by the proxy, on the wire) and seconds that reading the metadata through `source` (`bucket`
    or `hub`) takes in this process."""
    from dl.host.assembly import open_dataset

    before, served, t0 = proxy.requests, proxy.bytes_served, time.perf_counter()
    meta = open_dataset(root, source, {"storage_options": storage_options})
    return {"metadata_requests": proxy.requests - before, "metadata_s": round(time.perf_counter() - t0, 3),
            "metadata_mb": round((proxy.bytes_served - served) / 1e6, 1),
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
    pythons = {"lerobot": args.anchor_python, "lerobot-0.6": args.lerobot06_python, "dl-map": sys.executable,
               "dl-pool": sys.executable}
    loaders = [name for name in args.loaders.split(",") if pythons.get(name)]
    loaders += [f"{name}@{how}" for how in args.selections.split(",") if how for name in loaders
                if name.startswith("dl-")]
    pythons.update({name: sys.executable for name in loaders if "@" in name})
    caps = {name: args.lerobot_cap_s if name.startswith("lerobot") else None for name in loaders}
    cold = {name: measure(pythons[name], name, str(root), env, cap_s=caps[name]) for name in loaders}
    warm: dict[str, list[dict]] = {name: [] for name in loaders}
    for _ in range(args.repeats):
        for name in loaders:
            if "gave_up_s" not in cold[name]:  # a loader that gave up cold is not run warm
                warm[name].append(measure(pythons[name], name, str(root), env, cap_s=caps[name]))
    for name in loaders:
        rows.append(_row(size, name, warm[name] or [cold[name]], cold[name]))
    for source in ("bucket", "hub"):
        if getattr(args, source):
            rows.extend(_remote_rows(args, source, root, size, env))


def run_mix(args, env: dict, rows: list[dict]) -> None:
    """The `--mix` row: a mixture of `args.mix` generated members (`scale_mixture`), cold once, then warm runs."""
    from scale_dataset import scale_mixture

    t0 = time.perf_counter()
    members = scale_mixture(args.mix, args.mix_step)
    spec = Path(args.data_dir) / f"mix-{args.mix}-{args.mix_step}.json"
    spec.write_text(json.dumps(members))
    print(f"{args.mix} members ready in {time.perf_counter() - t0:.1f} s", flush=True)
    cold = measure(sys.executable, MIX_LOADER, str(spec), env)
    runs = [measure(sys.executable, MIX_LOADER, str(spec), env) for _ in range(args.repeats)]
    rows.append(_row(cold["episodes"], f"{MIX_LOADER} ({args.mix} members)", runs or [cold], cold))


def _remote_rows(args, source: str, root: Path, size: int, env: dict) -> list[dict]:
    """dl's loaders on `root` through `source`: `bucket` (a loopback S3 server) or `hub` (dl.testing's loopback Hub,
    its LFS files on its CDN), behind a proxy adding `--latency-ms` to every request."""
    from contextlib import ExitStack

    from dl.testing.fault_proxy import FaultProxy
    from dl.testing.hub_server import HubServer
    from dl.testing.s3_server import S3Server

    out = []
    with ExitStack() as stack:
        if source == "bucket":
            s3 = stack.enter_context(S3Server())
            url, upstream = s3.upload(root, "scale", root.name), s3.endpoint_url
        else:
            hub = stack.enter_context(HubServer(page_size=1000))  # the Hub's own page size
            url, upstream = f"scale/{root.name}", hub.endpoint
            hub.add_revision(url, root)
            env = {**env, "HF_HUB_OFFLINE": "0"}
        proxy = stack.enter_context(FaultProxy(upstream, latency_s=args.latency_ms / 1000))
        storage = s3.storage_options(proxy.endpoint_url) if source == "bucket" else {"endpoint": proxy.endpoint_url}
        requests = metadata_requests(url, source, storage, proxy)
        def run(name: str) -> dict:
            served = proxy.bytes_served
            got = measure(sys.executable, name, url, env, source, {"storage_options": storage})
            return {**got, "fetched_mb": round((proxy.bytes_served - served) / 1e6, 1)}

        for name in ("dl-map", "dl-pool"):
            cold = run(name)
            runs = [run(name) for _ in range(args.repeats)]
            out.append({**_row(size, f"{name} ({source})", runs or [cold], cold), **requests,
                        "fetched_mb": statistics.median(r["fetched_mb"] for r in runs or [cold])})
    return out


def _row(size: int, name: str, runs: list[dict], cold: dict | None) -> dict:
    if "gave_up_s" in runs[0]:
        row = {"episodes": size, "loader": name, "gave_up_s": runs[0]["gave_up_s"], "runs": runs}
        print(json.dumps({k: v for k, v in row.items() if k != "runs"}), flush=True)
        return row
    keys = ("start_s", "build_s", "first_batch_s", "peak_rss_mb", "pss_mb")
    row = {"episodes": size, "loader": name, **{k: statistics.median(r[k] for r in runs) for k in keys},
           "runs": runs}
    if cold is not None:
        row["cold_build_s"] = cold.get("build_s", f"gave up after {cold.get('gave_up_s')} s")
    print(json.dumps({k: v for k, v in row.items() if k != "runs"}), flush=True)
    return row


def _verdict(row: dict) -> str:
    """Whether `row` meets its issue-68 target (`TARGETS`), or "-" where none applies."""
    remote = row["loader"].endswith(("(bucket)", "(hub)"))
    kind = ("mix" if row["loader"].startswith(MIX_LOADER) else "remote" if remote
            else "local" if row["loader"].startswith("dl-") and row["episodes"] >= 1_000_000 else None)
    if "@" in row["loader"]:
        return "-"
    if kind is None or (kind == "remote" and row["episodes"] < 1_000_000):
        return "-"
    start, rss = TARGETS[kind]
    met = row["start_s"] <= start and (rss is None or row["peak_rss_mb"] <= rss)
    return ("met" if met else "missed") + f" (<= {start:g} s" + (f", <= {rss} MB)" if rss else ")")


def _metadata(row: dict) -> str:
    return f"{row['metadata_requests']} ({row['metadata_mb']})" if "metadata_requests" in row else "-"


def report(rows: list[dict]) -> str:
    lines = ["| episodes | loader | start s | build s | 1st batch s | peak RSS MB | PSS MB | cold build s | "
             "metadata requests (MB) | fetched MB | target |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "gave_up_s" in r:
            lines.append(f"| {r['episodes']:,} | {r['loader']} | gave up after {r['gave_up_s']:g} s |"
                         + " - |" * 8)
            continue
        lines.append(f"| {r['episodes']:,} | {r['loader']} | {r['start_s']:.2f} | {r['build_s']:.2f} | "
                     f"{r['first_batch_s']:.2f} | {r['peak_rss_mb']} | {r['pss_mb']} | {r.get('cold_build_s', '-')} | "
                     f"{_metadata(r)} | {r.get('fetched_mb', '-')} | {_verdict(r)} |")
    full = {(r["episodes"], r["loader"]): r for r in rows if "build_s" in r}
    parts = [(r, full.get((r["episodes"], r["loader"].partition("@")[0]))) for r in rows if "@" in r["loader"]]
    if parts:
        lines += ["", "| episodes | loader | selection | build s | the whole dataset's build s | share |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {r['episodes']:,} | {r['loader'].partition('@')[0]} | {r['loader'].partition('@')[2]} | "
                  f"{r['build_s']:.2f} | {whole['build_s']:.2f} | {r['build_s'] / whole['build_s']:.1%} |"
                  for r, whole in parts if whole and "build_s" in r]
    sized = [r for r in rows if "start_s" in r and not r["loader"].startswith(MIX_LOADER) and "@" not in r["loader"]]
    if len({r["episodes"] for r in sized}) > 1:
        lines += ["", "| loader | start s per 10k episodes | peak RSS MB per 10k episodes |", "|---|---|---|"]
        for name in dict.fromkeys(r["loader"] for r in sized):
            mine = sorted((r for r in sized if r["loader"] == name), key=lambda r: r["episodes"])
            xs = [r["episodes"] for r in mine]
            lines.append(f"| {name} | {slope_per_10k(xs, [r['start_s'] for r in mine]):.3f} | "
                         f"{slope_per_10k(xs, [r['peak_rss_mb'] for r in mine]):.1f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode")
    one = sub.add_parser("child", help="one measured run (used by the parent)")
    one.add_argument("loader", help=f"one of {', '.join((*LOADERS, MIX_LOADER))}, dl's with @SELECTION")
    one.add_argument("root")
    one.add_argument("--source", default="local")
    one.add_argument("--source-options")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="episodes per dataset, comma-separated")
    parser.add_argument("--loaders", default=",".join(LOADERS))
    parser.add_argument("--repeats", type=int, default=3, help="warm runs per loader and size [3]")
    parser.add_argument("--latency-ms", type=float, default=20.0,
                        help="added to every request of --bucket's and --hub's loopback servers [20]")
    parser.add_argument("--anchor-python", default=os.path.join(os.environ.get("ANCHOR_DIR", "/tmp/anchor"),
                                                                "venv/bin/python"),
                        help="the LeRobot anchor venv's python (setup.sh); LeRobot is skipped when it is missing")
    parser.add_argument("--lerobot06-python", default=os.path.join(os.environ.get("ANCHOR_DIR", "/tmp/anchor"),
                                                                   "venv06/bin/python"),
                        help="LeRobot 0.6.1's python (`lerobot-0.6`); skipped when it is missing")
    parser.add_argument("--lerobot-cap-s", type=float, default=1800.0,
                        help="stop a LeRobot run that has no first batch after this many seconds [1800]")
    parser.add_argument("--mix", type=int, default=0, help="also a mixture of this many generated datasets [0: none]")
    parser.add_argument("--mix-step", type=int, default=100,
                        help="member i of --mix has step x (i + 1) episodes [100]")
    parser.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "dl-scale"),
                        help="the measured runs' dl cache and HF home (the datasets are in dl's cache folder)")
    parser.add_argument("--selections", default="",
                        help=f"also dl's loaders on 1%% of the episodes, locally (of {', '.join(SELECTIONS)})")
    parser.add_argument("--bucket", action="store_true", help="also through the bucket source (loopback S3)")
    parser.add_argument("--hub", action="store_true", help="also through the hub source (dl.testing's loopback Hub)")
    parser.add_argument("--out", default="scale.json")
    args = parser.parse_args()
    if args.mode == "child":
        child(args.loader, args.root, args.source, args.source_options)
        return 0
    for option in ("anchor_python", "lerobot06_python"):
        if not Path(getattr(args, option)).exists():
            print(f"no LeRobot at {getattr(args, option)}: its loader is left out", file=sys.stderr)
            setattr(args, option, None)
    if args.mix < 0 or args.mix_step < 1 or args.lerobot_cap_s <= 0:
        parser.error("--mix must be >= 0, --mix-step >= 1 and --lerobot-cap-s > 0")
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "DL_CACHE_DIR": str(data / "dl-cache"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_HOME": str(data / "hf-home")}
    rows: list[dict] = []
    for size in [int(s) for s in args.sizes.split(",") if s]:
        run_size(args, size, env, rows)
    if args.mix:
        run_mix(args, env, rows)
    Path(args.out).write_text(json.dumps(rows, indent=2))
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
