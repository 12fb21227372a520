"""The pool's decode buffer: the decoded frames of a consumer's open chunks, decoded in order once per chunk
and looked up per sample, within a byte budget fixed before the epoch starts."""

import numpy as np
import torch

from dl.contracts.decoder import DecodedFrames, FrameRequest
from dl.format.metadata import DatasetMeta, EpisodeMeta
from dl.format.tabular import EpisodeArrays

from .chunk_pool import Chunk


def frame_bytes(meta: DatasetMeta, key: str) -> int:
    """Bytes of one decoded frame of camera `key`: the product of its info.json shape ([H, W, C]), uint8; a depth
    camera's int16 codes take 2 bytes a pixel."""
    return int(np.prod(meta.features[key]["shape"])) * (2 if key in meta.depth else 1)


def chunk_bytes(meta: DatasetMeta, chunk_frames: int, offsets: dict[str, np.ndarray]) -> int:
    """The most bytes one open chunk's decoded frames can hold: per camera, `chunk_frames` frames for each of
    its distinct window offsets (`offsets`, in frames; [0] without a window)."""
    return sum(chunk_frames * len(np.unique(offsets.get(key, [0]))) * frame_bytes(meta, key) for key in meta.video_keys)


class _Camera:
    """One camera's decoded runs of one chunk, searchable by presentation time."""

    def __init__(self, runs: list[DecodedFrames]):
        self.runs = runs
        self.pts = np.concatenate([r.pts_s.numpy() for r in runs])
        self.where = [(r, i) for r, run in enumerate(runs) for i in range(len(run.pts_s))]
        self.nbytes = sum(r.data.numel() * r.data.element_size() for r in runs)

    def frames(self, timestamps: tuple[float, ...]) -> DecodedFrames:
        """The buffered frame nearest each timestamp (the caller checks the tolerance): a view for one
        timestamp, one copy for a window."""
        query = np.asarray(timestamps, dtype=np.float64)
        right = np.clip(np.searchsorted(self.pts, query), 1, len(self.pts) - 1) if len(self.pts) > 1 else \
            np.zeros(len(query), dtype=np.int64)
        left = np.maximum(right - 1, 0)
        nearest = np.where(np.abs(self.pts[left] - query) <= np.abs(self.pts[right] - query), left, right)
        picked = [self.where[int(k)] for k in nearest]
        if len(picked) == 1:
            r, i = picked[0]
            data = self.runs[r].data[i:i + 1]
        else:
            data = torch.stack([self.runs[r].data[i] for r, i in picked])
        return DecodedFrames(data, torch.from_numpy(self.pts[nearest]))


class DecodeBuffer:
    """Decoded frames of the open chunks of one consumer.

    A chunk is decoded when its first frame is drawn: per camera, the rows its samples need (its rows shifted
    by each window offset, clamped to the episode) as runs of consecutive frames, all in one
    `Decoder.decode` call (runs decode in order after one seek; cameras may decode concurrently); and
    dropped when its last frame is emitted. So each frame is decoded about once instead of once per sample
    with a seek, and the buffer never holds more than open chunks x `chunk_bytes`.

    Args:
        builder: the loader's `dl.format.samples.SampleBuilder` (decoder, source, window offsets).
        counters: `dl.dataloader.shared_counters.SharedCounters` with "chunks_decoded", "frames_decoded" and
            "decode_buffer_bytes_peak", counted in this process's slot (None: not counted).

    Attributes:
        nbytes: bytes of decoded frames held now.
    """

    def __init__(self, builder, counters=None):
        self.builder, self.counters = builder, counters
        self._chunks: dict[tuple[int, int], dict[str, _Camera]] = {}
        self.nbytes = 0

    def frames(self, chunk: Chunk, episode: EpisodeMeta, arrays: EpisodeArrays,
               requests: dict[str, FrameRequest]) -> dict[str, DecodedFrames]:
        """Per camera, the buffered frames nearest each requested timestamp (decoding the chunk first if
        this is its first sample)."""
        cameras = self._chunks.get(chunk.key)
        if cameras is None:
            cameras = self._chunks[chunk.key] = self._decode(chunk, episode, arrays)
        return {key: cameras[key].frames(request.timestamps) for key, request in requests.items()}

    def drop(self, chunk: Chunk) -> None:
        """Forget a closed chunk's frames."""
        cameras = self._chunks.pop(chunk.key, None)
        if cameras is not None:
            self.nbytes -= sum(c.nbytes for c in cameras.values())

    def _decode(self, chunk: Chunk, episode: EpisodeMeta, arrays: EpisodeArrays) -> dict[str, _Camera]:
        length = len(arrays["timestamp"])
        lo, hi = int(chunk.rows[0]), int(chunk.rows[-1])
        plan: list[tuple[str, FrameRequest]] = []
        for key in self.builder.meta.video_keys:
            span = episode.videos[key]
            for a, b in _merged([(lo + d, hi + d) for d in np.unique(self.builder.deltas.get(key, [0]))], length):
                queries = self.builder.query_times(arrays, key)[a:b + 1].tolist()
                timestamps = self.builder.file_times(episode, key, queries)
                plan.append((key, FrameRequest(span.path, timestamps, run=True, depth=key in self.builder.meta.depth)))
        self.builder.ensure_checked({r.path for _, r in plan})
        decoded = self.builder.decoder.decode(self.builder.meta.source, [r for _, r in plan])
        runs: dict[str, list[DecodedFrames]] = {}
        for (key, _), frames in zip(plan, decoded, strict=True):
            runs.setdefault(key, []).append(frames)
        cameras = {key: _Camera(r) for key, r in runs.items()}
        self.nbytes += sum(c.nbytes for c in cameras.values())
        if self.counters is not None:
            self.counters.add("chunks_decoded")
            self.counters.add("frames_decoded", sum(len(r.timestamps) for _, r in plan))
            self.counters.set_max("decode_buffer_bytes_peak", self.nbytes)
        return cameras


def _merged(intervals: list[tuple[int, int]], length: int) -> list[tuple[int, int]]:
    """Inclusive row intervals clamped to [0, length - 1], overlapping or adjacent ones merged, ascending."""
    out: list[list[int]] = []
    for a, b in sorted((min(max(a, 0), length - 1), min(max(b, 0), length - 1)) for a, b in intervals):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]
