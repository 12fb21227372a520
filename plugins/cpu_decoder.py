"""Decoder `cpu`: torchcodec on the CPU (AV1 via libdav1d, H.264, HEVC, MPEG-4 Part 2: whatever the
system FFmpeg decodes)."""

import functools
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait

import torch

from dl.contracts.decoder import DecodedFrames, FrameRequest
from dl.contracts.errors import DlError
from dl.contracts.hookspecs import hookimpl
from dl.contracts.source import Source
from dl.dataloader.world import process_cores
from dl.kits.video.decoder_cache import DecoderCache
from dl.kits.video.torchcodec_video import (
    SEEK_MODES,
    TorchcodecDecoder,
    checked_resize,
    decoder_bytes,
    open_video,
    stream_facts,
)


class CpuDecoder(TorchcodecDecoder):
    """torchcodec `VideoDecoder` on the CPU with an LRU of open decoders per process.

    Args:
        cache_size: decoders kept open per process (DataLoader worker). Opening costs a container parse;
            keep it >= the number of video files a worker touches in a short window. None: 64, raised by the host
            to what the loader reads in turn (`dl.host.reconcile`); a number you give is kept as given.
        cache_bytes: the most memory the open decoders of one process may hold (each is estimated at
            (num_threads + 3) decoded YUV 4:2:0 frames: `dl.kits.video.torchcodec_video.decoder_bytes`).
        num_threads: FFmpeg threads per decoder (1: parallelism comes from DataLoader workers).
        seek_mode: torchcodec's "approximate" (LeRobot's choice: frame positions from the container header,
            no scan on open), "exact" (scans the file once on open) or "auto": approximate where the header is
            trustworthy (frame count, rate and duration present and consistent, stream starting at 0), exact
            where not. Decoded timestamps are checked against tolerance_s either way.
        camera_threads: decode the files of one `decode` call (a sample's cameras) in this many threads
            (torchcodec releases the GIL), or "auto": as many as this process has cores to itself
            (`dl.dataloader.world.process_cores`: cores / DataLoader workers / local ranks), so threads only run where
            cores would otherwise idle.
        resize: [height, width] in pixels every frame is scaled to while it is decoded (torchcodec's `Resize`
            transform: bilinear with antialiasing, in FFmpeg), or None: the stream's own size. For mixtures of
            datasets whose cameras differ in size (`dl.make_mixture`). Depth cameras keep their size unless
            `resize_depth`.
        resize_depth: also scale depth cameras to `resize`, by nearest neighbour on the stream's 12-bit codes
            (`torch.nn.functional.interpolate`, mode "nearest-exact"), so that every depth served is one the camera
            measured: interpolating between a near and a far surface would invent depths between them.

    Raises:
        DlError: an option out of range.
    """

    name = "cpu"

    def __init__(self, cache_size: int | None = None, cache_bytes: int = 512_000_000, num_threads: int = 1,
                 seek_mode: str = "auto", camera_threads: int | str = "auto", resize: tuple[int, int] | None = None,
                 resize_depth: bool = False):
        if seek_mode not in SEEK_MODES:
            raise DlError(f"decoder cpu: seek_mode must be one of {', '.join(SEEK_MODES)}, got {seek_mode!r}.")
        if camera_threads != "auto" and not (isinstance(camera_threads, int) and camera_threads >= 1):
            raise DlError(f"decoder cpu: camera_threads must be 'auto' or an integer >= 1, got {camera_threads!r}.")
        if not isinstance(num_threads, int) or num_threads < 0:
            raise DlError(f"decoder cpu: num_threads must be an integer >= 0 (0: FFmpeg decides), got {num_threads!r}.")
        self.num_threads, self.seek_mode, self.camera_threads = num_threads, seek_mode, camera_threads
        self.resize = checked_resize(resize, "decoder cpu")
        if resize_depth and self.resize is None:
            raise DlError("decoder cpu: resize_depth scales depth cameras to resize; give resize=[height, width] too.")
        self.resize_depth = bool(resize_depth)
        held = (num_threads or os.cpu_count() or 1) + 3
        self.cache_size_chosen = cache_size is not None
        self.cache = DecoderCache(64 if cache_size is None else cache_size, cache_bytes,
                                  functools.partial(decoder_bytes, frames=held))
        self._pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (pid, threads, pool)
        self._cores: tuple[int, int] | None = None  # (pid, process_cores()): fixed for a process

    def __getstate__(self):
        return {**self.__dict__, "_pool": None, "_cores": None}  # threads do not travel to other processes

    # ------------------------------------------------------------------------------------ opening
    def _open(self, source: Source, path: str):
        return open_video(source, path, seek_mode=self.seek_mode, num_threads=self.num_threads, device="cpu",
                          resize=self.resize)

    # ------------------------------------------------------------------------------------ decoding
    def decode(self, source: Source, requests: Sequence[FrameRequest]) -> list[DecodedFrames]:
        """The requests' files decoded in `camera_threads` threads (one file's requests stay in one thread:
        a decoder is not shared between threads); decoders are opened in the calling thread."""
        decoders = {r.path: self._opened(source, r) for r in requests}
        threads = min(len(decoders), self._process_cores() if self.camera_threads == "auto" else self.camera_threads)

        def one(r: FrameRequest) -> DecodedFrames:
            return self._request(decoders[r.path], source, r)

        if threads <= 1:
            return [one(r) for r in requests]
        by_file: dict[str, list[int]] = {}
        for i, r in enumerate(requests):
            by_file.setdefault(r.path, []).append(i)
        pool = self._threads(threads)
        futures = {path: pool.submit(lambda idx: [one(requests[i]) for i in idx], idx) for path, idx in by_file.items()}
        # every file's decode ends before any error is raised: a decoder still decoding after an error elsewhere would
        # be handed to another thread by the next call (the cache's), and two threads in one FFmpeg decoder crash
        wait(futures.values())
        out: list[DecodedFrames | None] = [None] * len(requests)
        for path, idx in by_file.items():
            for i, decoded in zip(idx, futures[path].result(), strict=True):
                out[i] = decoded
        return out

    def _request(self, opened, source: Source, request: FrameRequest) -> DecodedFrames:
        """As `TorchcodecDecoder._request`; a depth stream's codes scaled to `resize` when `resize_depth`."""
        decoded = super()._request(opened, source, request)
        if request.depth and self.resize_depth:
            codes = torch.nn.functional.interpolate(decoded.data.float(), size=self.resize, mode="nearest-exact")
            decoded = DecodedFrames(codes.to(decoded.data.dtype), decoded.pts_s)
        return decoded

    def _threads(self, n: int) -> ThreadPoolExecutor:
        """This process's camera threads (a forked child or a larger request starts new ones)."""
        if self._pool is None or self._pool[0] != os.getpid() or self._pool[1] < n:
            if self._pool is not None and self._pool[0] == os.getpid():
                self._pool[2].shutdown(wait=False)  # its threads end once their work is done
            self._pool = (os.getpid(), n, ThreadPoolExecutor(n, thread_name_prefix="dl-camera"))
        return self._pool[2]

    def _process_cores(self) -> int:
        """`process_cores()`, once per process (a syscall and the worker info, which do not change)."""
        if self._cores is None or self._cores[0] != os.getpid():
            self._cores = (os.getpid(), process_cores())
        return self._cores[1]

    def probe(self, source: Source, path: str) -> dict:
        """Stream facts, plus the `seek_mode` this decoder uses for the file ("approximate" or "exact"), from the
        file's decoder in this process's cache (a loader probes a file the first time it decodes from it, so the
        probe costs no second open)."""
        return stream_facts(self._decoder(source, path))


@hookimpl
def register_decoders(register):
    register("cpu", CpuDecoder, "torchcodec on CPU (AV1, H.264, HEVC, MPEG-4 Part 2), LRU of open decoders")
