"""Build LeRobot-compatible samples from an episode's tabular arrays and its videos.

A sample is a dict: every non-video feature as a tensor in its info.json dtype (shape-[1] scalars come
back 0-d, as `LeRobotDataset` returns them), `task` (str), and each camera key as `[C, H, W]` (float32 in
[0, 1], or uint8). A key in `delta_timestamps` yields `[T, ...]` and a bool `{key}_is_pad [T]`.

Building is split in two so a loader can decode late: `tabular()` needs only RAM, `decode()` reads video.
"""

import numpy as np
import torch

from ..contracts.config import LoaderConfig
from ..contracts.decoder import DecodedFrames, Decoder, FrameRequest
from ..contracts.errors import TimestampToleranceError
from .delta import delta_indices, window
from .metadata import DatasetMeta, EpisodeMeta
from .tabular import EpisodeArrays

VideoQueries = dict[str, list[float]]
"""Per camera key, the episode-relative timestamps (s) to decode."""


class SampleBuilder:
    """Turns (episode, row) into a sample.

    Args:
        meta: the dataset metadata.
        keys: the tabular keys to emit (see `dl.format.tabular.tabular_keys`).
        decoder: decodes camera frames.
        config: delta_timestamps, image_dtype and tolerance_s are used.

    Raises:
        DlError: (at construction) a bad delta_timestamps.
    """

    def __init__(self, meta: DatasetMeta, keys: list[str], decoder: Decoder, config: LoaderConfig):
        self.meta, self.keys, self.decoder, self.config = meta, keys, decoder, config
        self.image_dtype = config.image_dtype
        self.deltas = delta_indices(config.delta_timestamps or {}, meta.fps, keys + meta.video_keys,
                                    config.tolerance_s)

    def tabular(self, arrays: EpisodeArrays, row: int) -> tuple[dict, VideoQueries]:
        """The tabular part of the sample at `row` of an episode, and the timestamps its cameras need."""
        length = len(arrays["index"])
        sample: dict = {}
        for key in self.keys:
            column = arrays[key]
            if key in self.deltas:
                rows, pad = window(row, self.deltas[key], length)
                sample[key] = _to_tensor(column[rows])
                sample[f"{key}_is_pad"] = torch.from_numpy(pad)
            else:
                sample[key] = _to_tensor(column[row])
        sample["task"] = self.meta.tasks[int(arrays["task_index"][row])]
        queries = {}
        for key in self.meta.video_keys:
            if key in self.deltas:
                rows, pad = window(row, self.deltas[key], length)
                sample[f"{key}_is_pad"] = torch.from_numpy(pad)
                queries[key] = arrays["timestamp"][rows].tolist()
            else:
                queries[key] = [arrays["timestamp"][row].item()]
        return sample, queries

    def emit_uint8(self, on: bool = True) -> None:
        """From now on give camera frames as uint8 [0, 255], whatever `config.image_dtype` says (`on`), or as
        `config.image_dtype` again (not `on`): for a DataLoader whose collate converts them to float32 while it
        stacks the batch (`dl.dataloader.frames.stack_frames`), one pass over the pixels instead of two. Affects
        only this copy of the builder (this process)."""
        self.image_dtype = "uint8" if on else self.config.image_dtype

    def requests(self, episode: EpisodeMeta, queries: VideoQueries) -> dict[str, FrameRequest]:
        """Per camera key, what to ask the decoder for: the queried timestamps on the file's timeline."""
        return {key: FrameRequest(episode.videos[key].path,
                                  tuple(episode.videos[key].from_timestamp + t for t in timestamps))
                for key, timestamps in queries.items()}

    def decode(self, episode: EpisodeMeta, sample: dict, queries: VideoQueries,
               decoded: dict[str, DecodedFrames] | None = None) -> dict:
        """Add the camera frames to `sample` (in place; returned): every camera of the sample in one
        `Decoder.decode` call (which may decode the cameras concurrently), or from `decoded`, frames already
        decoded per camera key that cover the queries (the `pool` loader's chunk buffer). Each frame is the
        decoded one nearest its query, checked against `tolerance_s`.

        Raises:
            TimestampToleranceError: a decoded frame is `tolerance_s` or farther from its query; the
                message names the file, the episode and the timestamps.
        """
        requests = self.requests(episode, queries)
        decoded = dict(decoded or {})
        missing = [key for key in requests if key not in decoded]
        if missing:
            frames = self.decoder.decode(self.meta.source, [requests[key] for key in missing])
            decoded.update(zip(missing, frames, strict=True))
        for key, request in requests.items():
            frames = self.pick(episode, key, request, decoded[key])
            if self.image_dtype == "float32":
                frames = frames.float().div_(255.0)  # bitwise equal to LeRobot's frames / 255.0, 2x faster
            sample[key] = frames if key in self.deltas else frames[0]
        return sample

    def pick(self, episode: EpisodeMeta, key: str, request: FrameRequest, decoded: DecodedFrames):
        """The frames of `decoded` nearest each of `request.timestamps`, uint8 `[T, C, H, W]` (a view of
        `decoded.data` when it holds exactly the queried frames in order, else a copy).

        Raises:
            TimestampToleranceError: a nearest frame is `tolerance_s` or farther from its query.
        """
        if len(request.timestamps) == 1 == len(decoded.pts_s):  # the map loader's case, without numpy (30x faster)
            if abs(request.timestamps[0] - decoded.pts_s.item()) < self.config.tolerance_s:
                return decoded.data
        query = np.asarray(request.timestamps, dtype=np.float64)
        pts = decoded.pts_s.numpy()
        gap = np.abs(query[:, None] - pts[None, :])
        which = gap.argmin(1)
        nearest = gap[np.arange(len(query)), which]
        if not (nearest < self.config.tolerance_s).all():
            bad = np.flatnonzero(nearest >= self.config.tolerance_s).tolist()
            raise TimestampToleranceError(
                f"{self.meta.source.url}/{request.path} (episode {episode.index}, camera {key}): decoded "
                f"frames at {[round(float(pts[which[i]]), 6) for i in bad]} s are farther than "
                f"tolerance_s={self.config.tolerance_s} from the queried "
                f"{[round(float(query[i]), 6) for i in bad]} s. The video and the parquet timestamps "
                "disagree; re-encode the video, drop this episode, or raise tolerance_s."
            )
        if len(which) == len(pts) and (which == np.arange(len(which))).all():
            return decoded.data
        if len(which) == 1:
            return decoded.data[int(which[0]):int(which[0]) + 1]
        return decoded.data[torch.from_numpy(which).to(decoded.data.device)]

    def build(self, episode: EpisodeMeta, arrays: EpisodeArrays, row: int) -> dict:
        """The full sample at `row` of `episode`."""
        sample, queries = self.tabular(arrays, row)
        return self.decode(episode, sample, queries)


def _to_tensor(value):
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return value.tolist()
        return torch.from_numpy(np.array(value))  # copy: the source may be a read-only memory map
    if isinstance(value, np.generic) and not isinstance(value, np.str_ | np.bytes_):
        return torch.from_numpy(np.array(value))  # 0-d, the scalar's dtype; 4x faster than torch.tensor
    return value
