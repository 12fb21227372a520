"""Decoder `cpu`: torchcodec on the CPU (AV1 via libdav1d, H.264, HEVC, MPEG-4 Part 2: whatever the
system FFmpeg decodes)."""

import re

import torch

from dl.decoder import DecodedFrames, Decoder
from dl.decoder_cache import DecoderCache
from dl.errors import VideoDecodeError
from dl.hookspecs import hookimpl
from dl.source import Source


class CpuDecoder(Decoder):
    """torchcodec `VideoDecoder` on the CPU with an LRU of open decoders per process.

    Args:
        cache_size: decoders kept open per process (DataLoader worker). Opening costs a container parse;
            keep it >= the number of video files a worker touches in a short window.
        num_threads: FFmpeg threads per decoder (1: parallelism comes from DataLoader workers).
        seek_mode: torchcodec's "approximate" (LeRobot's choice: no full scan on open) or "exact".
    """

    name = "cpu"

    def __init__(self, cache_size: int = 64, num_threads: int = 1, seek_mode: str = "approximate"):
        self.num_threads, self.seek_mode = num_threads, seek_mode
        self.cache = DecoderCache(cache_size)

    def _open(self, source: Source, path: str):
        from torchcodec.decoders import VideoDecoder

        try:
            return VideoDecoder(source.video_input(path), seek_mode=self.seek_mode,
                                num_ffmpeg_threads=self.num_threads, device="cpu")
        except (RuntimeError, ValueError, OSError) as exc:
            raise VideoDecodeError(f"cannot open video {source.url}/{path}: {_reason(exc)}") from exc

    def _decoder(self, source: Source, path: str):
        return self.cache.get((source.url, path), lambda: self._open(source, path))

    def frames_at(self, source: Source, path: str, timestamps: list[float]) -> DecodedFrames:
        decoder = self._decoder(source, path)
        meta = decoder.metadata
        indices = [round(t * meta.average_fps) for t in timestamps]
        if max(indices) >= meta.num_frames or min(indices) < 0:
            raise VideoDecodeError(
                f"{source.url}/{path} has {meta.num_frames} frames ({meta.duration_seconds:.3f} s); "
                f"timestamps {timestamps} s fall outside it. The episode's from/to timestamps in "
                "meta/episodes do not match this video."
            )
        try:
            batch = decoder.get_frames_at(indices=indices)
        except RuntimeError as exc:
            raise VideoDecodeError(f"decoding {source.url}/{path} at {timestamps} s failed: {_reason(exc)}") from exc
        return DecodedFrames(batch.data, batch.pts_seconds.to(torch.float64))

    def probe(self, source: Source, path: str) -> dict:
        meta = self._open(source, path).metadata  # not cached: probes happen in the main process, once
        return {"codec": meta.codec, "width": meta.width, "height": meta.height, "num_frames": meta.num_frames,
                "average_fps": meta.average_fps, "duration_s": meta.duration_seconds}


def _reason(exc: Exception) -> str:
    """torchcodec's message without the C++ source location it starts with ("SingleStreamDecoder,
    /path/File.cpp:52, Could not open input file: ..." -> "Could not open input file: ...")."""
    return re.sub(r"^.*?\.cpp:\d+, ", "", str(exc), flags=re.S)


@hookimpl
def register_decoders(register):
    register("cpu", CpuDecoder, "torchcodec on CPU (AV1, H.264, HEVC, MPEG-4 Part 2), LRU of open decoders")
