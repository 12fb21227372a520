"""Opening a dataset, before and after a change: each run a fresh process that imports dl from a given source tree,
imports torch and torchcodec (outside the timed build: every tree loads them), builds the loader (`dl.make_dataset`:
metadata, selection, the up-front checks, the files' frame times) and takes its first sample; trees interleaved,
`--repeats` runs each, medians printed: wall seconds and, as the machine may be shared, the CPU seconds of the build
(this process and its threads). `--steady N` adds the median CPU seconds of N further builds in the same process
(imports and page cache warm: the build's own work, with far less spread); `--clear FOLDER` deletes that subfolder of
dl's cache folder (`frame_times`, `screens`, `tabular`) before every timed build, to measure a build without it.

    .venv/bin/python benchmarks/open_speed.py --tree before=/tmp/dl_before --tree after=. \\
        --root /work/shared/datasets/open50@0,3-6,8,10-24,26-32,35-49 --root /tmp/scale50/100k --repeats 3

A tree is a checkout of this repository (`core/`, `cli/`, `plugins/`), e.g. `git archive <commit> | tar -x -C DIR`.
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import importlib.abc, importlib.machinery, importlib.util, json, os, resource, shutil, statistics, sys, time
tree = sys.argv[1]
mapping = {"dl": tree + "/core", "dl.cli": tree + "/cli", "dl.plugins": tree + "/plugins"}
class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in mapping:
            return importlib.util.spec_from_file_location(name, mapping[name] + "/__init__.py",
                                                          submodule_search_locations=[mapping[name]])
        parent = name.rpartition(".")[0]
        if parent in mapping:
            return importlib.machinery.PathFinder.find_spec(name, [mapping[parent]])
        return None
sys.meta_path.insert(0, Finder())
t0 = time.perf_counter()
import dl
import torch, torchcodec.decoders  # the libraries every tree loads: imported here, not timed as the build
def cpu():
    return sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
cache = os.environ.get("DL_CACHE_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "dl")  # dl.kits.paths.cache_dir
def clear():
    for folder in filter(None, sys.argv[5].split(",")):
        shutil.rmtree(os.path.join(cache, folder), ignore_errors=True)
clear()
t1, c1 = time.perf_counter(), cpu()
root, _, episodes = sys.argv[2].partition("@")
chosen = [e for part in episodes.split(",") for a, _, b in [part.partition("-")]
          for e in range(int(a), int(b or a) + 1)] if episodes else None
ds = dl.make_dataset(root, loader=sys.argv[3], episodes=chosen)
t2, c2 = time.perf_counter(), cpu()
sample = ds[0] if sys.argv[3] == "map" else next(iter(ds))
t3 = time.perf_counter()
steady = []
for _ in range(int(sys.argv[4])):
    clear()
    c = cpu()
    dl.make_dataset(root, loader=sys.argv[3], episodes=chosen)
    steady.append(cpu() - c)
assert dl.__file__.startswith(tree), dl.__file__
print(json.dumps({"import_s": t1 - t0, "build_s": t2 - t1, "build_cpu_s": c2 - c1, "first_s": t3 - t2,
                  "steady_cpu_s": statistics.median(steady) if steady else None}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", required=True, help="NAME=DIR (repeatable)")
    ap.add_argument("--root", action="append", required=True, help="a dataset folder, with @EPISODES to select some "
                    "(e.g. @0,3-6) (repeatable)")
    ap.add_argument("--loader", action="append", help="map and/or pool [both]")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steady", type=int, default=0, metavar="N", help="also time N builds after the first, in the "
                    "same process (median CPU s)")
    ap.add_argument("--clear", action="append", default=[], metavar="FOLDER", help="a subfolder of dl's cache folder "
                    "deleted before every timed build: frame_times, screens, tabular (repeatable)")
    args = ap.parse_args()
    clear = ",".join(args.clear)
    trees = dict(t.split("=", 1) for t in args.tree)
    loaders = args.loader or ["map", "pool"]
    runs: dict[tuple, list[dict]] = {}
    for root in args.root:
        for loader in loaders:
            for tree in trees.values():  # untimed: caches (the map loader's tabular file), page cache
                _child(tree, root, loader, 0, "")
            for _ in range(args.repeats):
                for name, tree in trees.items():
                    found = _child(tree, root, loader, args.steady, clear)
                    runs.setdefault((Path(root.partition("@")[0]).name, loader, name), []).append(found)
    print(f"{'dataset':10s} {'loader':6s} {'tree':8s} {'build s':>8s} {'build CPU s':>11s} {'1st sample s':>12s}  "
          f"(medians of {args.repeats}; every run's build CPU s{'; steady CPU s' if args.steady else ''})")
    for (root, loader, name), found in runs.items():
        build, cpu, first, steady = ([r[k] for r in found] for k in ("build_s", "build_cpu_s", "first_s",
                                                                     "steady_cpu_s"))
        line = (f"{root:10s} {loader:6s} {name:8s} {statistics.median(build):8.3f} {statistics.median(cpu):11.3f} "
                f"{statistics.median(first):12.3f}  {', '.join(f'{c:.3f}' for c in cpu)}")
        if args.steady:
            line += f"; {statistics.median(steady):.3f} ({', '.join(f'{c:.3f}' for c in steady)})"
        print(line, flush=True)


def _child(tree: str, root: str, loader: str, steady: int, clear: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(Path(tree).resolve()), root, loader, str(steady), clear],
                          capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{tree} {root} {loader}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
