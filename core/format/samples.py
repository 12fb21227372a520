"""Build LeRobot-compatible samples from an episode's tabular arrays and its videos.

A sample is a dict: every non-camera feature as a tensor in its info.json dtype (shape-[1] scalars come
back 0-d, as `LeRobotDataset` returns them), `task` (str; and `subtask` where the dataset has LeRobot 0.4's
`subtask_index` and meta/subtasks.parquet), and each camera key, video or image feature, as `[C, H, W]` (float32 in
[0, 1], or uint8), a depth camera (`dl.format.depth`) as float32 `[1, H, W]` in mm or m. A key in
`delta_timestamps` yields `[T, ...]` and a bool `{key}_is_pad [T]`.

Building is split in two so a loader can decode late: `tabular()` needs only RAM, `decode()` decodes the video
frames and the images stored in the data parquet.
"""

import bisect
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ..contracts.config import LoaderConfig
from ..contracts.decoder import SHOWN_AFTER_S, DecodedFrames, Decoder, FrameRequest
from ..contracts.errors import TimestampToleranceError
from .columns import EpisodeArrays
from .delta import delta_indices, window
from .episodes import episodes_in_file
from .metadata import DatasetMeta, EpisodeMeta
from .streams import check_file, check_streams
from .timestamp_checks import camera_span, row_times, span_bounds

VideoQueries = dict[str, list[float]]
"""Per video camera key, the episode-relative timestamps (s) to decode."""


class EncodedImages(tuple):
    """The encoded PNG/JPEG files of one image feature of a sample (one per window offset), in the sample between
    `SampleBuilder.tabular` and `SampleBuilder.decode`, which replaces them with their pixels."""


class SampleBuilder:
    """Turns (episode, row) into a sample.

    Args:
        meta: the dataset metadata.
        keys: the tabular keys to emit (see `dl.format.tabular.tabular_keys`).
        decoder: decodes camera frames.
        config: delta_timestamps, image_dtype, tolerance_s and frame_pairing are used.

    Raises:
        DlError: (at construction) a bad delta_timestamps.
    """

    def __init__(self, meta: DatasetMeta, keys: list[str], decoder: Decoder, config: LoaderConfig):
        self.meta, self.keys, self.decoder, self.config = meta, keys, decoder, config
        self.image_dtype = config.image_dtype
        self.image_transforms: Callable | None = None  # `set_image_transforms`
        self.deltas = delta_indices(config.delta_timestamps or {}, meta.fps, keys + meta.camera_keys,
                                    config.tolerance_s)
        self.subtasks = "subtask_index" in keys and bool(meta.subtasks)
        self.sizes: dict[str, tuple[int, int]] = {}  # camera key -> (height, width) every file must have
        self._selection: Sequence[EpisodeMeta] = ()  # the selected episodes (`check_streams`)
        self._file_keys: dict[str, str] = {}  # each selected video file -> its camera
        self._checked: set[str] = set()  # video files checked against the selection in this process
        self._spans: dict[tuple[int, str], list[float] | None] = {}  # (episode, camera) -> its frames' times (s)
        self._row_times: dict[tuple[int, str], np.ndarray] = {}  # frame_pairing "row": (episode, camera) -> times

    def check_streams(self, episodes: list[EpisodeMeta]) -> None:
        """Check the selection's video files against info.json and meta/episodes: the first episode's files now
        (with warnings where info.json disagrees with the streams, once, in the process that opens the dataset;
        `dl.format.streams.check_streams`), every other file the first time this process decodes from it
        (`ensure_checked`: no file is opened only to be checked).

        Raises:
            DatasetFormatError: a span past its file's end, a frame size that differs between files.
        """
        self._selection, self._file_keys = episodes, _file_keys(episodes)
        if episodes and self.meta.video_keys:
            self.sizes = check_streams(self.meta, self.decoder, episodes[0], episodes)
            self._checked.update(span.path for span in episodes[0].videos.values())

    def ensure_checked(self, paths) -> None:
        """Check each video file of `paths` not yet checked in this process against the selected episodes it holds
        (`dl.format.streams.check_file`), from the decoder's facts of the file (which the `cpu` decoder keeps
        open for the decode that follows)."""
        for path in paths:
            if path in self._checked or path not in self._file_keys:
                continue
            facts = self.decoder.probe(self.meta.source, path)
            key = self._file_keys[path]
            check_file(self.meta, key, path, facts, episodes_in_file(self._selection, key, path), self.sizes.get(key))
            self._checked.add(path)

    def tabular(self, arrays: EpisodeArrays, row: int) -> tuple[dict, VideoQueries]:
        """The tabular part of the sample at `row` of an episode (image features still encoded:
        `EncodedImages`), and the timestamps its video cameras need."""
        length = len(arrays["index"])
        sample: dict = {}
        for key in self.keys:
            column = arrays.get(key)
            if column is None:  # a column the data file lacks (`dl.format.columns.DROPPED_BY_ANNOTATION`)
                sample[key] = None
            elif key in self.deltas:
                rows, pad = window(row, self.deltas[key], length)
                sample[key] = _to_tensor(column[rows])
                sample[f"{key}_is_pad"] = torch.from_numpy(pad)
            else:
                sample[key] = _to_tensor(column[row])
        sample["task"] = self.meta.tasks[int(arrays["task_index"][row])]
        if self.subtasks and "subtask_index" in arrays:
            sample["subtask"] = self.meta.subtasks[int(arrays["subtask_index"][row])]
        queries = {}
        for key in self.meta.video_keys:
            times = self.query_times(arrays, key)
            if key in self.deltas:
                rows, pad = window(row, self.deltas[key], length)
                sample[f"{key}_is_pad"] = torch.from_numpy(pad)
                queries[key] = times[rows].tolist()
            else:
                queries[key] = [times[row].item()]
        for key in self.meta.image_keys:
            if key in self.deltas:
                rows, pad = window(row, self.deltas[key], length)
                sample[f"{key}_is_pad"] = torch.from_numpy(pad)
                sample[key] = EncodedImages(arrays[key][rows])
            else:
                sample[key] = EncodedImages((arrays[key][row],))
        return sample, queries

    def query_times(self, arrays: EpisodeArrays, key: str) -> np.ndarray:
        """[length]: each row's camera `key` query on the episode's timeline: its `timestamp` (LeRobot's pairing), or
        with `frame_pairing="row"` its own frame's time (`dl.format.timestamp_checks.row_times`; the loader checked
        the span holds one frame per row)."""
        if self.config.frame_pairing == "timestamp":
            return arrays["timestamp"]
        index = int(arrays["episode_index"][0])
        times = self._row_times.get((index, key))
        if times is None:
            times = row_times(self.meta, self.meta.episodes[index], key)
            if times is None:  # no index: the recorded timestamps, checked against the decoded frames
                times = np.asarray(arrays["timestamp"], dtype=np.float64)
            self._row_times[(index, key)] = times
        return times

    def emit_uint8(self, on: bool = True) -> None:
        """From now on give camera frames as uint8 [0, 255], whatever `config.image_dtype` says (`on`), or as
        `config.image_dtype` again (not `on`): for a DataLoader whose collate converts them to float32 while it
        stacks the batch (`dl.dataloader.frames.stack_frames`), one pass over the pixels instead of two. Affects
        only this copy of the builder (this process)."""
        if self.image_transforms is None or self.config.image_dtype == "uint8":  # transforms see the asked dtype
            self.image_dtype = "uint8" if on else self.config.image_dtype

    def set_image_transforms(self, transforms: Callable | None) -> None:
        """Apply `transforms` to every camera but depth of each sample from now on (None: none), as LeRobot's
        `LeRobotDataset` applies its `image_transforms`: to the frames as served (uint8 `[C, H, W]`, or float32 in
        [0, 1]; `[T, C, H, W]` with a window), after decoding, drawing from torch's RNG (seeded per DataLoader
        worker). With float32 frames the conversion is then not deferred to the collate (`emit_uint8` keeps
        float32), so the transforms see what LeRobot's see."""
        self.image_transforms = transforms
        if transforms is not None:
            self.image_dtype = self.config.image_dtype

    def file_times(self, episode: EpisodeMeta, key: str, timestamps) -> tuple[float, ...]:
        """Episode-relative `timestamps` (s) of camera `key` on its file's timeline (plus the span's
        `from_timestamp`), each replaced by the time of the nearest of the episode's own frames (the file's index,
        `dl.format.frame_times`): the decoder then decodes exactly that frame, whatever the file's frame rate, and a
        recorded timestamp past the span's end gets the episode's last frame, not another episode's (the gap to
        the query is then checked against `tolerance_s` like any other). A file without an index: the query plus
        half a frame period (the frame shown there is the nearest on a constant-rate stream)."""
        frames = self._spans.get((episode.index, key), ())
        if frames == ():
            found = camera_span(self.meta, episode, key)
            if found is None:
                frames = None
            else:
                first, last = span_bounds(found[1], found[2], len(found[0]))
                frames = found[0][first:last + 1].tolist()
            self._spans[(episode.index, key)] = frames
        start = episode.videos[key].from_timestamp
        if frames is None:
            return tuple(start + t + 0.5 / self.meta.fps - 2 * SHOWN_AFTER_S for t in timestamps)
        return tuple(_nearest(frames, start + t) for t in timestamps)

    def requests(self, episode: EpisodeMeta, queries: VideoQueries) -> dict[str, FrameRequest]:
        """Per video camera key, what to ask the decoder for: the queried timestamps on the file's timeline, held
        within the episode's frames (`file_times`)."""
        return {key: FrameRequest(episode.videos[key].path, self.file_times(episode, key, timestamps),
                                  depth=key in self.meta.depth) for key, timestamps in queries.items()}

    def decode(self, episode: EpisodeMeta, sample: dict, queries: VideoQueries,
               decoded: dict[str, DecodedFrames] | None = None) -> dict:
        """Add the camera frames to `sample` (in place; returned): every video camera of the sample in one
        `Decoder.decode` call (which may decode the cameras concurrently), or from `decoded`, frames already
        decoded per camera key that cover the queries (the `pool` loader's chunk buffer); and the image features'
        pixels (`Decoder.decode_images`). Each video frame is the decoded one nearest its query, checked against
        `tolerance_s`.

        Raises:
            TimestampToleranceError: a decoded frame is `tolerance_s` or farther from its query; the
                message names the file, the episode and the timestamps.
        """
        requests = self.requests(episode, queries)
        decoded = dict(decoded or {})
        missing = [key for key in requests if key not in decoded]
        if missing:
            self.ensure_checked(requests[key].path for key in missing)
            frames = self.decoder.decode(self.meta.source, [requests[key] for key in missing])
            decoded.update(zip(missing, frames, strict=True))
        for key, request in requests.items():
            start = episode.videos[key].from_timestamp
            frames = self.pick(episode, key, request, decoded[key], tuple(start + t for t in queries[key]))
            sample[key] = self._served(key, frames)
        for key in self.meta.image_keys:
            images = self.decoder.decode_images(sample[key])
            sample[key] = self._served(key, images[0][None] if len(images) == 1 else torch.stack(images))
        if self.image_transforms is not None:
            for key in self.meta.camera_keys:
                if key in sample and key not in self.meta.depth:
                    sample[key] = self.image_transforms(sample[key])
        return sample

    def _served(self, key: str, frames: torch.Tensor) -> torch.Tensor:
        if key in self.meta.depth:  # 12-bit codes -> depth, as LeRobot 0.6.1 serves it
            frames = self.meta.depth[key].dequantize(frames, self.config.depth_output_unit)
        elif self.image_dtype == "float32" and frames.dtype == torch.uint8:
            frames = frames.float().div_(255.0)  # bitwise equal to LeRobot's frames / 255.0, in place
        return frames if key in self.deltas else frames[0]

    def pick(self, episode: EpisodeMeta, key: str, request: FrameRequest, decoded: DecodedFrames,
             wanted: tuple[float, ...] | None = None):
        """The frames of `decoded` nearest each of `wanted` (the queries on the file's timeline; default
        `request.timestamps`), uint8 `[T, C, H, W]` (a view of `decoded.data` when it holds exactly the queried
        frames in order, else a copy).

        Raises:
            TimestampToleranceError: a nearest frame is `tolerance_s` or farther from its query.
        """
        wanted = request.timestamps if wanted is None else wanted
        if len(wanted) == 1 == len(decoded.pts_s):  # the map loader's case, without numpy's per-call overhead
            if abs(wanted[0] - decoded.pts_s.item()) < self.config.tolerance_s:
                return decoded.data
        query = np.asarray(wanted, dtype=np.float64)
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


def _nearest(times: list[float], query: float) -> float:
    """The element of `times` (ascending, not empty) nearest `query` (the earlier on a tie, as LeRobot's argmin)."""
    at = bisect.bisect_left(times, query)
    if at == 0:
        return times[0]
    if at == len(times) or query - times[at - 1] <= times[at] - query:
        return times[at - 1]
    return times[at]


def _to_tensor(value):
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return value.tolist()
        return torch.from_numpy(np.array(value))  # copy: the source may be a read-only memory map
    if isinstance(value, np.generic) and not isinstance(value, np.str_ | np.bytes_):
        return torch.from_numpy(np.array(value))  # 0-d, the scalar's dtype; cheaper than torch.tensor
    return value


def _file_keys(episodes) -> dict[str, str]:
    """`{video file: camera key}` of the files the selected episodes use (the first camera naming a file), from the
    selection's columns where it has them (no `EpisodeMeta` per episode)."""
    out: dict[str, str] = {}
    columns, positions = getattr(episodes, "columns", None), getattr(episodes, "positions", None)
    if columns is not None:
        for key in columns.video_keys:
            for file in np.unique(columns.video_file[key][positions]).tolist():
                out.setdefault(columns.video_paths[key][file], key)
        return out
    for ep in episodes:
        for key, span in ep.videos.items():
            out.setdefault(span.path, key)
    return out
