"""A decoder wrapper that adds up the seconds spent decoding in this process (the benchmark's
fetch vs decode split)."""

import time
from collections.abc import Sequence

from ..contracts.decoder import DecodedFrames, Decoder, FrameRequest
from ..contracts.source import Source


class TimedDecoder(Decoder):
    """Delegates every call to `inner` (so its sequential and concurrent decoding are kept); `decode_s`
    accumulates the wall seconds spent in `frames_at`, `frames_in_run`, `decode` and `decode_images` (image features
    stored in the data parquet) in this process."""

    def __init__(self, inner: Decoder):
        self.inner, self.name, self.cache = inner, inner.name, inner.cache
        self.cache_size_chosen = inner.cache_size_chosen
        self.decode_s = 0.0

    def _timed(self, call, *args):
        t0 = time.perf_counter()
        try:
            return call(*args)
        finally:
            self.decode_s += time.perf_counter() - t0

    def frames_at(self, source: Source, path: str, timestamps: list[float]) -> DecodedFrames:
        return self._timed(self.inner.frames_at, source, path, timestamps)

    def frames_in_run(self, source: Source, path: str, timestamps: list[float]) -> DecodedFrames:
        return self._timed(self.inner.frames_in_run, source, path, timestamps)

    def depth_frames(self, source: Source, path: str, timestamps: list[float]) -> DecodedFrames:
        return self._timed(self.inner.depth_frames, source, path, timestamps)

    def decode(self, source: Source, requests: Sequence[FrameRequest]) -> list[DecodedFrames]:
        return self._timed(self.inner.decode, source, requests)

    def decode_images(self, images: Sequence[bytes]) -> list:
        return self._timed(self.inner.decode_images, images)

    def probe(self, source: Source, path: str) -> dict:
        return self.inner.probe(source, path)

    def dataloader_needs(self):
        return self.inner.dataloader_needs()
