"""The LeRobot v3.0 metadata model: `meta/info.json`, `meta/episodes/**/*.parquet`, `meta/tasks.parquet`
and `meta/stats.json`, read once through a Source, plus one listing of each top folder the dataset uses.

Everything is read once per run: `DatasetMeta` pickles with its listing into DataLoader workers, and
`write_snapshot()` / `from_snapshot()` carry it to other processes (benchmark runs, ranks) as a small JSON
file and a memory-mapped Arrow file of the episode columns, so none lists or re-reads anything (on the Hub
or S3, every listing is a request) and every process shares the columns' pages. Episode metadata is held as
columns (`dl.format.episodes`): a million episodes are a few arrays, and `EpisodeMeta` objects are views
built on demand."""

import json
import os
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..contracts.errors import (
    DatasetFormatError,
    DlError,
    MissingFilesError,
    format_indices,
    warn,
)
from ..contracts.source import FileSpan, Prefetches, Source
from ..kits.video_indexes import indexes_of
from .depth import DepthQuantizer
from .episode_checks import check_rate, check_totals, describe_problems, episode_problems
from .episodes import EpisodeColumns, EpisodeMapping, EpisodeMeta, EpisodeSelection, VideoSpan
from .features import camera_keys, is_depth_map, left_out, video_info
from .frame_times import FrameTimes
from .load_times import LoadTimes
from .meta_files import SUPPORTED_VERSION, read_episodes, read_info, read_json, read_tasks, top_folder

__all__ = ["DEFAULT_KEYS", "DatasetMeta", "EpisodeMeta", "EpisodeSelection", "SUPPORTED_VERSION", "VideoSpan"]

DEFAULT_KEYS = ("timestamp", "frame_index", "episode_index", "index", "task_index")
SNAPSHOT_FILE, SNAPSHOT_EPISODES = "metadata.json", "episodes.arrow"
"""The two files of a metadata snapshot (`DatasetMeta.write_snapshot`)."""


class DatasetMeta:
    """A LeRobot v3.0 dataset's metadata.

    Attributes:
        source: where the dataset lives.
        info: the parsed `meta/info.json`.
        fps: frames per second (info.json `fps`).
        features: the info.json feature table, `{key: {"dtype", "shape", ...}}`.
        video_keys: the cameras stored as video (dtype "video"), in info.json order, less those left out.
        image_keys: the cameras stored as PNG/JPEG bytes in the data parquet (dtype "image").
        camera_keys: video and image keys, in info.json order (LeRobot's `camera_keys`).
        tools: info.json's `tools` list (function schemas LeRobot 0.6's annotation tool declares for the tool calls
            in its language columns; [] when absent, where LeRobot's `meta.tools` gives its default `say` schema).
        depth: `{key: DepthQuantizer}` of the depth cameras among the video keys (`dl.format.depth`: served as
            depth, float32 `[1, H, W]` in mm or m, not as pictures), in info.json order.
        left_out: `{key: why}`: features dl does not serve (`dl.format.features.left_out`), each named in a
            one-line warning when loading.
        columns: every episode's metadata as arrays (`dl.format.episodes.EpisodeColumns`): what loaders,
            samplers and partitions read.
        episodes: every episode by index, a read-only mapping that builds each `EpisodeMeta` on demand.
        tasks: task strings by task_index.
        subtasks: subtask strings by subtask_index (`meta/subtasks.parquet`, LeRobot 0.4.x annotations; {} when
            absent): a dataset with a `subtask_index` feature gets a `subtask` string per sample, as in LeRobot.
        stats_document: the parsed `meta/stats.json` ({} when absent), as the file holds it (nested lists).
        stats: the same as LeRobot's `meta.stats` gives it, `{feature: {stat: tensor}}` (float32; counts int64),
            built on first use (`stats_tensors`).
        files: `{relative path: size in bytes}` of every file under `meta/` and the top folders of
            `data_path` and `video_path`, listed once when loading.
        frame_times: the video files' frame times read so far (`dl.format.frame_times.FrameTimes`), read by the
            process that builds a loader and carried with this object to workers and ranks.

    Raises (from `load`):
        DatasetFormatError: not a v3.0 dataset, or metadata missing/inconsistent.
    """

    def __init__(self, source: Source, info: dict, columns: EpisodeColumns, tasks: dict[int, str], stats: dict,
                 files: dict[str, int], subtasks: dict[int, str] | None = None):
        self.source, self.info, self.columns, self.tasks = source, info, columns, tasks
        self.stats_document = stats
        self.episodes = EpisodeMapping(columns)
        self.files, self.subtasks = files, subtasks or {}
        self.frame_times = FrameTimes()
        self.load_times = LoadTimes()
        self.fps: int = info["fps"]
        self.features: dict = info["features"]
        self.left_out: dict[str, str] = left_out(self.features)
        self.video_keys: list[str] = camera_keys(self.features, "video")
        self.image_keys: list[str] = camera_keys(self.features, "image")
        self.camera_keys: list[str] = [k for k in self.features if k in self.video_keys or k in self.image_keys]
        self.tools: list[dict] = list(info.get("tools") or [])
        self.depth: dict[str, DepthQuantizer] = {k: DepthQuantizer.of(k, self.features[k]) for k in self.video_keys
                                                 if is_depth_map(self.features[k])}

    @classmethod
    def load(cls, source: Source) -> "DatasetMeta":
        """Read and validate the metadata under `source`: info.json first, then one listing of `meta/` and
        of each top folder the path templates use, then the episodes, tasks and stats files (one read each)."""
        times = LoadTimes()
        with times.part("metadata_read"):
            info = read_info(source)
        files: dict[str, int] = {}
        folders = {"meta", *(top_folder(source, info, k) for k in ("data_path", "video_path") if info.get(k))}
        with times.part("listing"):
            for folder in sorted(folders):
                files.update(source.list_files(folder))
        with times.part("metadata_read"):
            tasks = read_tasks(source, files)
            subtasks = read_tasks(source, files, "meta/subtasks.parquet") if "meta/subtasks.parquet" in files else {}
            columns = read_episodes(source, info, files)
        with times.part("checks"):
            check_rate(source.url, info["fps"], columns)
            check_totals(source.url, info, columns)
        for key, why in left_out(info["features"]).items():
            warn(f"{source.url}/meta/info.json: feature {key} is {why}; dl leaves it out of the samples.")
        with times.part("metadata_read"):
            stats = read_json(source, "meta/stats.json") if "meta/stats.json" in files else {}
        pa.default_memory_pool().release_unused()  # the parquet reads' buffers: DataLoader workers fork from here
        meta = cls(source, info, columns, tasks, stats, dict(sorted(files.items())), subtasks)
        meta.load_times = times
        return meta

    def to_snapshot(self) -> dict:
        """What `load` read besides the episode columns, JSON-ready: the url, info.json, tasks, stats.json, the
        listing, the video indexes parsed so far (`dl.kits.video_indexes`), the seconds listing and reading took
        (`LoadTimes.read_once`) and a remote source's state (`write_snapshot` writes it with the columns beside it)."""
        return {"url": self.source.url, "info": self.info, "tasks": [[i, t] for i, t in self.tasks.items()],
                "subtasks": [[i, t] for i, t in self.subtasks.items()], "stats": self.stats_document,
                "files": self.files, "indexes": indexes_of(self.source).state(),
                "load_times": self.load_times.read_once(),
                "source": self.source.state() if isinstance(self.source, Prefetches) else {}}

    def write_snapshot(self, folder: str | os.PathLike) -> str:
        """Write everything `load` read into `folder` (created if missing): `metadata.json` (`to_snapshot()`, and
        the absolute path of the columns' file) and `episodes.arrow` (the episode columns, memory-mappable), so
        another process rebuilds this object with `from_snapshot` without a single request and maps the columns
        instead of copying them. Returns the path of `metadata.json` (what crosses to runs and ranks)."""
        folder = Path(folder).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        self.columns.write(str(folder / SNAPSHOT_EPISODES))
        path = folder / SNAPSHOT_FILE
        path.write_text(json.dumps({**self.to_snapshot(), "episodes": str(folder / SNAPSHOT_EPISODES)}))
        return str(path)

    @classmethod
    def from_snapshot(cls, source: Source, snapshot: "str | os.PathLike | dict") -> "DatasetMeta":
        """Rebuild from a `write_snapshot()`: the path of its `metadata.json`, or that file's parsed contents, on
        a `source` for the same dataset; the episode columns are mapped from the Arrow file it names (a relative
        name is beside `metadata.json`).

        Raises:
            DlError: the snapshot was taken from another dataset root, or is not readable.
        """
        where = Path(snapshot).parent if not isinstance(snapshot, dict) else Path.cwd()
        if not isinstance(snapshot, dict):
            try:
                snapshot = json.loads(Path(snapshot).read_text())
            except (OSError, ValueError) as exc:
                raise DlError(f"cannot read the metadata snapshot {snapshot}: {exc}.") from None
        if snapshot["url"] != source.url:
            raise DlError(f"metadata snapshot of {snapshot['url']} does not belong to {source.url}.")
        columns = EpisodeColumns.open(str(where / snapshot["episodes"]))
        tasks = {int(i): t for i, t in snapshot["tasks"]}
        subtasks = {int(i): t for i, t in snapshot.get("subtasks", [])}
        indexes_of(source).restore(snapshot.get("indexes") or {})
        if isinstance(source, Prefetches):
            source.restore(snapshot.get("source") or {})
        meta = cls(source, snapshot["info"], columns, tasks, snapshot["stats"], snapshot["files"], subtasks)
        meta.load_times = LoadTimes(snapshot.get("load_times"))
        return meta

    @cached_property
    def stats(self) -> dict:
        """meta/stats.json as LeRobot's normalizers take it (`stats_tensors`); a copy a caller may change."""
        return stats_tensors(self.stats_document)

    @cached_property
    def total_frames(self) -> int:
        """Frames over all episodes."""
        return int(self.columns.length.sum())

    @cached_property
    def problems(self) -> dict[int, str]:
        """`{episode index: what is wrong}` for every episode whose metadata cannot be served as is
        (`dl.format.episode_checks.episode_problems`: index range against length, camera spans against length,
        moved or overlapping spans); `select` refuses a selection that includes one."""
        return episode_problems(self.fps, self.columns)

    def video_info(self, key: str) -> dict:
        """info.json's `info` of camera `key` (`video_info` in older writers): `video.codec`, `video.fps`...;
        {} when absent."""
        return video_info(self.features[key])

    def info_codec(self, key: str) -> str | None:
        """The codec info.json claims for camera `key` (may disagree with the file: trust the stream)."""
        return self.video_info(key).get("video.codec")

    def select(self, episodes: list[int] | None) -> EpisodeSelection:
        """The episodes to load, ascending, as a sequence of `EpisodeMeta` views with their fields as arrays
        (`dl.format.episodes.EpisodeSelection`). `None` selects all: every episode info.json's `total_episodes`
        counts.

        Raises:
            DlError: an index is not an episode of this dataset, or an empty selection.
            DatasetFormatError: `None` while meta/episodes lacks episodes info.json counts (their data would be
                dropped silently; a partial upload: select the episodes it has), or a selected episode's metadata
                is wrong (`problems`).
            MissingFilesError: a data or video file of a selected episode does not exist (lists them all).
        """
        if episodes is None:
            positions = np.arange(len(self.columns), dtype=np.int64)
            absent = self._absent()
            if absent:
                raise DatasetFormatError(
                    f"{self.source.url}: meta/info.json counts total_episodes={self.info['total_episodes']} but "
                    f"meta/episodes has no row for episode(s) {format_indices(absent)} (it has {len(self.columns)}); "
                    f"their data would be dropped silently. Select the episodes meta/episodes has (--episodes "
                    f"{format_indices(self.columns.index.tolist())}), or restore meta/episodes from the dataset's "
                    "origin (a partial download or upload?).")
        else:
            wanted = list(episodes)
            if not wanted:
                raise DlError(f"no episodes selected from {self.source.url}: the selection is empty.")
            positions, unknown = self.columns.positions(np.unique(np.asarray(wanted, dtype=np.int64)))
            if len(unknown):
                raise DlError(
                    f"episode(s) {format_indices(unknown.tolist())} are not in {self.source.url} "
                    f"(it has episodes {format_indices(self.columns.index.tolist())})."
                )
        with self.load_times.part("checks"):
            return self._checked(positions)

    def _checked(self, positions: np.ndarray) -> EpisodeSelection:
        """`select`'s checks of the episodes at `positions`: their metadata, then their files."""
        chosen, problems = self.columns.index[positions], self.problems
        bad = chosen[np.isin(chosen, np.fromiter(problems, dtype=np.int64, count=len(problems)))]
        if len(bad):
            wrong = {int(e): problems[int(e)] for e in bad}
            good = chosen[~np.isin(chosen, list(wrong))].tolist()
            raise DatasetFormatError(
                f"{self.source.url}/meta/episodes describes {len(wrong)} selected episode(s) wrongly: "
                f"{describe_problems(wrong)}. Leave them out (--episodes {format_indices(good) or '(none left)'}) or "
                "restore meta/episodes from the dataset's origin.")
        selected = EpisodeSelection(self.columns, positions)
        self.check_files(selected)
        return selected

    def _absent(self) -> list[int]:
        """Episodes info.json's `total_episodes` counts that meta/episodes lacks, ascending."""
        total = self.info.get("total_episodes")
        if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
            return []
        listed = np.zeros(total, dtype=bool)
        index = self.columns.index
        listed[index[(index >= 0) & (index < total)]] = True
        return np.flatnonzero(~listed).tolist()

    def _selection(self, episodes) -> EpisodeSelection:
        if isinstance(episodes, EpisodeSelection):
            return episodes
        positions, unknown = self.columns.positions([ep.index for ep in episodes])
        if len(unknown):
            raise DlError(f"episode(s) {format_indices(unknown.tolist())} are not in {self.source.url}.")
        return EpisodeSelection(self.columns, positions)

    def _needed(self, selection: EpisodeSelection) -> list[tuple[str, np.ndarray]]:
        """(path, int64 episode indices needing it, ascending) for every file the selection needs."""
        cols, at = self.columns, selection.positions
        index = cols.index[at]
        needed: list[tuple[str, np.ndarray]] = []
        if not len(at):
            return needed
        for ids, paths in [(cols.data_file[at], cols.data_paths),
                           *((cols.video_file[k][at], cols.video_paths[k]) for k in cols.video_keys)]:
            order = np.argsort(ids, kind="stable")
            distinct, starts = np.unique(ids[order], return_index=True)
            for file_id, part in zip(distinct.tolist(), np.split(order, starts[1:]), strict=True):
                needed.append((paths[file_id], np.sort(index[part])))
        return needed

    def missing_files(self, episodes) -> dict[str, list[int]]:
        """Files the given episodes (an `EpisodeSelection`, or `EpisodeMeta`s of this dataset) need that do
        not exist: `{relative path: [episode indices]}`.

        Raises:
            UnsafePathError: a path (from info.json's templates) is absolute or leaves the dataset root.
        """
        missing: dict[str, list[int]] = {}
        for path, indices in self._needed(self._selection(episodes)):
            self.source.path(path)  # refuses a path that escapes the root, before it looks "missing"
            if path not in self.files:
                missing.setdefault(path, []).extend(indices.tolist())
        return {f: sorted(set(eps)) for f, eps in sorted(missing.items())}

    def complete_episodes(self) -> list[int]:
        """The indices of every episode whose data and video files all exist, ascending."""
        broken = {e for v in self.missing_files(EpisodeSelection(self.columns, np.arange(len(self.columns)))).values()
                  for e in v}
        return sorted(int(e) for e in self.columns.index if int(e) not in broken)

    def check_files(self, episodes) -> None:
        """Raise MissingFilesError naming every missing file of `episodes`."""
        missing = self.missing_files(episodes)
        if missing:
            eps = sorted({e for v in missing.values() for e in v})
            selected = self._selection(episodes).index
            usable = selected[~np.isin(selected, eps)].tolist()
            complete = None if usable else self.complete_episodes()  # nothing selected can be read: say what can
            raise MissingFilesError(self.source.url, list(missing), eps, usable, complete)

    def file_spans(self, episode: EpisodeMeta) -> list[FileSpan]:
        """What `episode` needs, for `Source.prepare` / `admit`: its data file's rows (`episode`) and each
        camera's video between its from/to timestamps, with the files' listed sizes and the episode's share of
        each (its frames over the frames of every episode in that data file; its span over the spans of every
        episode in that video file)."""
        spans = [FileSpan(episode.data_path, size=self.files.get(episode.data_path),
                          share=episode.length / self._file_totals[episode.data_path], episode=episode.index)]
        for video in episode.videos.values():
            total = self._file_totals[video.path]
            share = (video.to_timestamp - video.from_timestamp) / total if total > 0 else 1.0
            spans.append(FileSpan(video.path, size=self.files.get(video.path), share=share,
                                  from_timestamp=video.from_timestamp, to_timestamp=video.to_timestamp))
        return spans

    @cached_property
    def _file_totals(self) -> dict[str, float]:
        cols = self.columns
        totals = _sum_by(cols.data_file, cols.length.astype(np.float64), cols.data_paths)
        for key in cols.video_keys:
            spans = cols.to_timestamp[key] - cols.from_timestamp[key]
            for path, total in _sum_by(cols.video_file[key], spans, cols.video_paths[key]).items():
                totals[path] = totals.get(path, 0.0) + total
        return totals


def stats_tensors(document: dict) -> dict:
    """A `meta/stats.json` document as LeRobot's normalizers take it: `{feature: {stat: tensor}}`, floating values
    float32 and counts int64 (LeRobot reads the file into numpy arrays; its processors make them float32 tensors)."""
    import torch

    out = {}
    for key, entry in document.items():
        out[key] = {}
        for name, value in entry.items():
            array = np.asarray(value)
            out[key][name] = torch.as_tensor(array.astype(np.float32) if array.dtype.kind == "f" else array)
    return out


def _sum_by(ids: np.ndarray, values: np.ndarray, names: list[str]) -> dict[str, float]:
    sums = np.bincount(ids, weights=values, minlength=len(names))
    return {name: float(total) for name, total in zip(names, sums.tolist(), strict=True)}
