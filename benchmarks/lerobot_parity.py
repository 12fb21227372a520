"""Compare dl's `map` loader with LeRobot's `LeRobotDataset`, sample by sample, on one dataset.

Two steps, because LeRobot lives in its own venv (../shared/anchors/lerobot/setup.sh builds it):

    # 1. in the anchor venv: dump LeRobot's samples at the given positions
    $ANCHOR_DIR/venv/bin/python benchmarks/lerobot_parity.py dump --root R --episodes 0,3-6 \
        --delta actions=0,1,2 --positions 0,100,5000 --out /tmp/lerobot.pt
    # 2. in dl's venv: load dl's samples at the same positions and compare every key
    .venv/bin/python benchmarks/lerobot_parity.py compare --root R --episodes 0,3-6 \
        --delta actions=0,1,2 --positions 0,100,5000 --ref /tmp/lerobot.pt

`compare` prints one line per key with the largest absolute difference and exits 1 on any mismatch.
"""

import argparse
import os
import sys

import torch


def parse_delta(items):
    out = {}
    for item in items or []:
        key, offsets = item.split("=", 1)
        out[key] = [float(x) for x in offsets.split(",")]
    return out or None


def parse_list(text):
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def dump(args):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset("local/parity", root=args.root, episodes=parse_list(args.episodes),
                        video_backend="torchcodec", delta_timestamps=parse_delta(args.delta))
    torch.save({p: ds[p] for p in parse_list(args.positions)}, args.out)
    print(f"dumped {len(parse_list(args.positions))} LeRobot samples of {len(ds)} to {args.out}")


def compare(args):
    import dl

    ds = dl.make_dataset(args.root, episodes=parse_list(args.episodes), delta_timestamps=parse_delta(args.delta))
    ref = torch.load(args.ref, weights_only=False)
    worst: dict[str, float] = {}
    bad = 0
    for position, theirs in ref.items():
        ours = ds[position]
        for key, value in theirs.items():
            if key not in ours:
                print(f"position {position}: dl lacks {key!r}")
                bad += 1
                continue
            if isinstance(value, torch.Tensor):
                same = ours[key].shape == value.shape and ours[key].dtype == value.dtype
                diff = (ours[key].double() - value.double()).abs().max().item() if same else float("inf")
            else:
                diff = 0.0 if ours[key] == value else float("inf")
            worst[key] = max(worst.get(key, 0.0), diff)
            bad += diff != 0
    for key, diff in sorted(worst.items()):
        print(f"{key:30s} max |dl - lerobot| = {diff}")
    print(f"{len(ref)} samples, {bad} mismatching values")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["dump", "compare"])
    ap.add_argument("--root", required=True)
    ap.add_argument("--episodes", required=True)
    ap.add_argument("--delta", action="append", help="KEY=OFFSETS_S (repeatable)")
    ap.add_argument("--positions", required=True)
    ap.add_argument("--out")
    ap.add_argument("--ref")
    a = ap.parse_args()
    dump(a) if a.command == "dump" else compare(a)
