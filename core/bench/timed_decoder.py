"""A decoder wrapper that adds up the seconds spent decoding in this process (the benchmark's
fetch vs decode split)."""

import time

from ..decoder import DecodedFrames, Decoder
from ..source import Source


class TimedDecoder(Decoder):
    """Delegates to `inner`; `decode_s` accumulates wall seconds spent in `frames_at` in this process."""

    def __init__(self, inner: Decoder):
        self.inner, self.name, self.cache = inner, inner.name, inner.cache
        self.decode_s = 0.0

    def frames_at(self, source: Source, path: str, timestamps: list[float]) -> DecodedFrames:
        t0 = time.perf_counter()
        out = self.inner.frames_at(source, path, timestamps)
        self.decode_s += time.perf_counter() - t0
        return out

    def probe(self, source: Source, path: str) -> dict:
        return self.inner.probe(source, path)
