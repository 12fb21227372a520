"""What the `pool` loader's own work costs without a loader: the frames/s of its decode pattern alone, then with
each frame copied (uint8) or converted (float32) into a batch, in as many processes as a run has DataLoader
workers, beside the run's sequential decode ceiling (`dl.bench.ceiling`). A `pool` run of a given image dtype
cannot go faster than its figure here; the gap between that figure and the ceiling is what decoding chunks in a
shuffled order and writing the frames cost on this machine, before any loader, IPC or tabular work.

    .venv/bin/python benchmarks/pool_bound.py                          # open50's usable episodes, 2 processes
    .venv/bin/python benchmarks/pool_bound.py --root DIR --episodes 0-29 --workers 2 --seconds 10

The pattern is the pool's (`plugins/pool`): an episode is cut into chunks of `--chunk-frames` consecutive frames
opened in a shuffled order, `--open-chunks` decoded chunks are held at once, and a batch's samples are drawn one
frame at a time from random held chunks (cold memory, as in the pool's decode buffer). "decode" counts frames
decoded; "decode_uint8" also copies each served frame into a reused batch buffer in channels-last order, and
"decode_float32" writes it there divided by 255 (`dl.dataloader.frames.float32_into`, what a pool worker's
collate does). Prints one line per figure and writes --out (JSON).

Measured on open50 (2 processes, 2 cores, 8 s each): decode alone 84% of the sequential ceiling, with uint8
copies 65%, with float32 writes 38%: the float32 pass over cold frames costs more than decoding them, so no
float32 `pool` run can reach half the ceiling on this machine (docs/benchmark.md).
"""

import argparse
import json
import sys
import time

import numpy as np
import torch
import torch.utils.data
from dl_runs import OPEN50, OPEN50_USABLE

from dl.bench.ceiling_workers import decode_ceiling
from dl.cli.options import parse_episodes
from dl.contracts.config import LoaderConfig
from dl.contracts.decoder import FrameRequest
from dl.contracts.needs import merge_needs
from dl.dataloader.build import WorkerInit
from dl.dataloader.frames import float32_into
from dl.host.assembly import build_loader, open_dataset


class _Pattern(torch.utils.data.IterableDataset):
    """Yields one process's `{"decode": frames/s, "decode_uint8": ..., "decode_float32": ...}` (seeded by the
    worker id)."""

    def __init__(self, meta, decoder, episodes, args):
        self.meta, self.decoder, self.episodes, self.args = meta, decoder, episodes, args

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        seed = self.args.seed + (info.id if info else 0)
        yield {"decode": self._trial(seed, None), "decode_uint8": self._trial(seed, np.uint8),
               "decode_float32": self._trial(seed, np.float32)}

    def _chunks(self, rng: np.random.Generator):
        """(episode, first row) of chunks, episode after random episode, each one's chunks shuffled."""
        n = self.args.chunk_frames
        while True:
            ep = self.episodes[int(rng.integers(len(self.episodes)))]
            for start in rng.permutation(np.arange(0, ep.length, n)):
                yield ep, int(start)

    def _decode(self, ep, start: int) -> list[torch.Tensor]:
        rows = np.arange(start, min(start + self.args.chunk_frames, ep.length)) / self.meta.fps
        requests = [FrameRequest(span.path, tuple(span.from_timestamp + rows), run=True)
                    for span in ep.videos.values()]
        return [frames.data for frames in self.decoder.decode(self.meta.source, requests)]

    def _trial(self, seed: int, dtype: type | None) -> float:
        """Frames/s of the pattern, writing each served frame into a batch buffer of `dtype` (None: not at all;
        float32: divided by 255)."""
        rng = np.random.default_rng(seed)
        chunks = self._chunks(rng)
        held = [self._decode(*next(chunks)) for _ in range(self.args.open_chunks)]
        served = [0] * len(held)
        batch = None
        n, slot, t0 = 0, 0, time.perf_counter()
        while time.perf_counter() - t0 < self.args.seconds:
            i = int(rng.integers(len(held)))
            cameras = held[i]
            if dtype is not None:
                frames = [camera[served[i]].movedim(-3, -1).numpy() for camera in cameras]
                if batch is None:
                    batch = np.empty((self.args.batch_size, len(frames), *frames[0].shape), dtype)
                for k, frame in enumerate(frames):
                    if dtype is np.float32:
                        float32_into(batch[slot, k], frame)
                    else:
                        np.copyto(batch[slot, k], frame)
                slot = (slot + 1) % self.args.batch_size
            n += len(cameras)
            served[i] += 1
            if served[i] == cameras[0].shape[0]:
                held[i], served[i] = self._decode(*next(chunks)), 0
        return n / (time.perf_counter() - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=str(OPEN50))
    parser.add_argument("--episodes", default=None, help="episodes [open50's usable ones with the default root; all]")
    parser.add_argument("--workers", type=int, default=2, help="processes decoding at once (a run's workers)")
    parser.add_argument("--seconds", type=float, default=10.0, help="per figure and process")
    parser.add_argument("--chunk-frames", type=int, default=16, help="the pool's decode_chunk_frames")
    parser.add_argument("--open-chunks", type=int, default=17, help="decoded chunks held at once (a run's "
                        "decode_open_chunks: 17 for open50 with the default 256M budget)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--ceiling-s", type=float, default=6.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="pool_bound.json")
    args = parser.parse_args()
    episodes = args.episodes or (OPEN50_USABLE if args.root == str(OPEN50) else None)

    meta = open_dataset(args.root, "local", {})
    selection = parse_episodes(episodes) if episodes else None
    built = build_loader(meta, "pool", "cpu", config=LoaderConfig(episodes=selection))
    selected = built.loader.episodes
    ceiling = decode_ceiling(meta, built.decoder, selected[:64], args.ceiling_s, args.workers)
    needs = merge_needs({"decoder cpu": built.decoder.dataloader_needs(),
                         "source local": meta.source.dataloader_needs()})
    loader = torch.utils.data.DataLoader(_Pattern(meta, built.decoder, selected, args), batch_size=None,
                                         num_workers=args.workers,
                                         multiprocessing_context=needs.multiprocessing_context,
                                         worker_init_fn=WorkerInit(needs.worker_init_fn))
    found = list(loader)
    sequential = ceiling["sequential_frames_per_s"]
    out = {"args": vars(args), "decode_ceiling": ceiling, "processes": found}
    for kind in ("decode", "decode_uint8", "decode_float32"):
        total = sum(f[kind] for f in found)
        out[kind] = {"frames_per_s": round(total, 1), "pct_of_sequential_ceiling": round(100 * total / sequential, 1)}
        print(f"{kind:15s} {total:8.1f} frames/s = {100 * total / sequential:5.1f}% of the sequential ceiling "
              f"({sequential:.1f} frames/s, spread {ceiling['sequential_spread_pct']}%)")
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
