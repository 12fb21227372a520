"""How a decoder should read an episode's byte ranges: through a file-like view of the whole file serving the
cached ranges (what `dl.kits.remote.views.CachedView` does), or through a small self-contained MP4 per episode
(LeRobot PR #3917's approach; here FFmpeg's own stream copy of the span, the best such a file can be).
Decodes every episode of a file both ways, in a random order, and prints frames/s of each.

    .venv/bin/python benchmarks/episode_view.py VIDEO.mp4 --episode-s 10
"""

import argparse
import io
import subprocess
import sys
import tempfile
import time

import numpy as np

from dl.kits.mp4_index import merge_ranges
from dl.kits.video_indexes import VideoIndexes


class View(io.RawIOBase):
    """`data` served through Python read calls (as the cached view serves local copies)."""

    def __init__(self, data: bytes, ranges):
        self.data, self.ranges, self.pos = data, ranges, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=io.SEEK_SET):
        self.pos = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: len(self.data)}[whence] + offset
        return self.pos

    def readinto(self, buffer):
        end = next((b for a, b in self.ranges if a <= self.pos < b), self.pos + len(buffer))
        chunk = self.data[self.pos:min(end, self.pos + len(buffer))]
        buffer[: len(chunk)] = chunk
        self.pos += len(chunk)
        return len(chunk)


def main() -> int:
    from torchcodec.decoders import VideoDecoder

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("video")
    parser.add_argument("--episode-s", type=float, default=10.0)
    args = parser.parse_args()
    data = open(args.video, "rb").read()
    index = VideoIndexes().get(args.video, len(data), lambda a, b: data[a:b], args.video)
    fps = len(index.pts) / (index.pts_s.max() + index.pts_s.min() + 1 / 30)
    bounds = np.arange(0.0, float(index.pts_s.max()), args.episode_s)
    episodes = [(float(a), min(float(a) + args.episode_s, float(index.pts_s.max()) + 1 / fps)) for a in bounds]
    order = np.random.default_rng(0).permutation(len(episodes))
    clips = {}
    with tempfile.TemporaryDirectory() as tmp:
        for a, b in episodes:  # the per-episode MP4s, built before timing
            out = f"{tmp}/clip.mp4"
            subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-ss", f"{a}", "-to", f"{b}", "-i",
                            args.video, "-c", "copy", "-movflags", "+faststart", out], check=True)
            clips[a] = open(out, "rb").read()
    spans = [index.decode_span(a, b)[:2] for a, b in episodes]
    ranges = merge_ranges([*index.header, *(r for lo, hi in spans for r in index.byte_ranges(lo, hi))])
    results = {}
    for name in ("view", "episode mp4"):
        frames, t0 = 0, time.perf_counter()
        decoder = VideoDecoder(View(data, ranges), seek_mode="approximate") if name == "view" else None
        for e in order:
            a, b = episodes[e]
            if name == "view":
                batch = decoder.get_frames_in_range(round(a * fps), round(b * fps))
            else:
                clip = VideoDecoder(clips[a], seek_mode="approximate")
                batch = clip.get_frames_in_range(0, clip.metadata.num_frames)
            frames += len(batch.data)
        results[name] = frames / (time.perf_counter() - t0)
        print(f"{name:>12}: {frames} frames, {results[name]:.1f} frames/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
