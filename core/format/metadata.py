"""The LeRobot v3.0 metadata model: `meta/info.json`, `meta/episodes/**/*.parquet`, `meta/tasks.parquet`
and `meta/stats.json`, read once through a Source, plus one listing of each top folder the dataset uses.

Everything is read once per run: `DatasetMeta` pickles with its listing into DataLoader workers, and
`to_snapshot()` / `from_snapshot()` carry it to other processes (benchmark runs, ranks), so neither
lists nor re-reads anything (on the Hub or S3, every listing is a request)."""

import json
import posixpath
from dataclasses import asdict, dataclass
from functools import cached_property

from ..contracts.errors import DatasetFormatError, DlError, MissingFilesError, SourceFileNotFoundError, format_indices
from ..contracts.source import FileSpan, Source
from .checks import check_episode_meta

SUPPORTED_VERSION = "v3.0"
DEFAULT_KEYS = ("timestamp", "frame_index", "episode_index", "index", "task_index")


@dataclass(frozen=True)
class VideoSpan:
    """Where one camera's frames of one episode live: `path` (relative to the root) between
    `from_timestamp` and `to_timestamp` (seconds, in the file's timeline)."""

    path: str
    from_timestamp: float
    to_timestamp: float


@dataclass(frozen=True)
class EpisodeMeta:
    """One episode: its `length` in frames, its global frame indices
    [`dataset_from_index`, `dataset_to_index`), its data file and its video span per camera key."""

    index: int
    length: int
    dataset_from_index: int
    dataset_to_index: int
    data_path: str
    videos: dict[str, VideoSpan]
    tasks: tuple[str, ...]

    def files(self) -> list[str]:
        """Every file this episode needs, relative to the root."""
        return [self.data_path, *(v.path for v in self.videos.values())]

    def to_dict(self) -> dict:
        """Plain dict (JSON-ready); `from_dict` inverts it."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "EpisodeMeta":
        videos = {k: VideoSpan(**v) for k, v in data["videos"].items()}
        return cls(**{**data, "videos": videos, "tasks": tuple(data["tasks"])})


class DatasetMeta:
    """A LeRobot v3.0 dataset's metadata.

    Attributes:
        source: where the dataset lives.
        info: the parsed `meta/info.json`.
        fps: frames per second (info.json `fps`).
        features: the info.json feature table, `{key: {"dtype", "shape", ...}}`.
        video_keys: the keys whose dtype is "video", in info.json order (the camera keys).
        episodes: every episode by index.
        tasks: task strings by task_index.
        stats: the parsed `meta/stats.json` ({} when absent).
        files: `{relative path: size in bytes}` of every file under `meta/` and the top folders of
            `data_path` and `video_path`, listed once when loading.

    Raises (from `load`):
        DatasetFormatError: not a v3.0 dataset, or metadata missing/inconsistent.
    """

    def __init__(self, source: Source, info: dict, episodes: dict[int, EpisodeMeta], tasks: dict[int, str],
                 stats: dict, files: dict[str, int]):
        self.source, self.info, self.episodes, self.tasks, self.stats = source, info, episodes, tasks, stats
        self.files = files
        self.fps: int = info["fps"]
        self.features: dict = info["features"]
        self.video_keys: list[str] = [k for k, f in self.features.items() if f.get("dtype") == "video"]

    @classmethod
    def load(cls, source: Source) -> "DatasetMeta":
        """Read and validate the metadata under `source`: info.json first, then one listing of `meta/` and
        of each top folder the path templates use, then the episodes, tasks and stats files."""
        info = _read_info(source)
        files: dict[str, int] = {}
        folders = {"meta", *(_top_folder(source, info, k) for k in ("data_path", "video_path") if k in info)}
        for folder in sorted(folders):
            files.update(source.list_files(folder))
        tasks = _read_tasks(source, files)
        episodes = _read_episodes(source, info, files)
        check_episode_meta(source.url, info, episodes)
        stats = _read_json(source, "meta/stats.json") if "meta/stats.json" in files else {}
        return cls(source, info, episodes, tasks, stats, dict(sorted(files.items())))

    def to_snapshot(self) -> dict:
        """Everything `load` read, JSON-ready, so another process can rebuild this object with
        `from_snapshot` without a single request."""
        return {"url": self.source.url, "info": self.info, "tasks": [[i, t] for i, t in self.tasks.items()],
                "stats": self.stats, "files": self.files, "episodes": [e.to_dict() for e in self.episodes.values()],
                "source": self.source.state()}

    @classmethod
    def from_snapshot(cls, source: Source, snapshot: dict) -> "DatasetMeta":
        """Rebuild from `to_snapshot()` output, on a `source` for the same dataset.

        Raises:
            DlError: the snapshot was taken from another dataset root.
        """
        if snapshot["url"] != source.url:
            raise DlError(f"metadata snapshot of {snapshot['url']} does not belong to {source.url}.")
        episodes = {e["index"]: EpisodeMeta.from_dict(e) for e in snapshot["episodes"]}
        tasks = {int(i): t for i, t in snapshot["tasks"]}
        source.restore(snapshot.get("source") or {})
        return cls(source, snapshot["info"], episodes, tasks, snapshot["stats"], snapshot["files"])

    @cached_property
    def total_frames(self) -> int:
        """Frames over all episodes."""
        return sum(e.length for e in self.episodes.values())

    def video_info(self, key: str) -> dict:
        """info.json's `info` of camera `key` (`video_info` in older writers): `video.codec`, `video.fps`...;
        {} when absent."""
        feature = self.features[key]
        return feature.get("info") or feature.get("video_info") or {}

    def info_codec(self, key: str) -> str | None:
        """The codec info.json claims for camera `key` (may disagree with the file: trust the stream)."""
        return self.video_info(key).get("video.codec")

    def select(self, episodes: list[int] | None) -> list[EpisodeMeta]:
        """The episodes to load, ascending. `None` selects all.

        Raises:
            DlError: an index is not an episode of this dataset.
            MissingFilesError: a data or video file of a selected episode does not exist (lists them all).
        """
        if episodes is None:
            chosen = sorted(self.episodes)
        else:
            unknown = sorted(set(episodes) - set(self.episodes))
            if unknown:
                raise DlError(
                    f"episode(s) {format_indices(unknown)} are not in {self.source.url} "
                    f"(it has episodes {format_indices(list(self.episodes))})."
                )
            chosen = sorted(set(episodes))
        selected = [self.episodes[i] for i in chosen]
        self.check_files(selected)
        return selected

    def missing_files(self, episodes: list[EpisodeMeta]) -> dict[str, list[int]]:
        """Files the given episodes need that do not exist: `{relative path: [episode indices]}`.

        Raises:
            UnsafePathError: a path (from info.json's templates) is absolute or leaves the dataset root.
        """
        needed: dict[str, list[int]] = {}
        for ep in episodes:
            for f in ep.files():
                if f not in needed:
                    self.source.path(f)  # refuses a path that escapes the root, before it looks "missing"
                needed.setdefault(f, []).append(ep.index)
        present = self._existing_files()
        return {f: eps for f, eps in sorted(needed.items()) if f not in present}

    def check_files(self, episodes: list[EpisodeMeta]) -> None:
        """Raise MissingFilesError naming every missing file of `episodes`."""
        missing = self.missing_files(episodes)
        if missing:
            eps = sorted({e for v in missing.values() for e in v})
            usable = sorted({ep.index for ep in episodes} - set(eps))
            raise MissingFilesError(self.source.url, list(missing), eps, usable)

    def _existing_files(self) -> set[str]:
        return set(self.files)

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
        totals: dict[str, float] = {}
        for ep in self.episodes.values():
            totals[ep.data_path] = totals.get(ep.data_path, 0) + ep.length
            for video in ep.videos.values():
                totals[video.path] = totals.get(video.path, 0) + video.to_timestamp - video.from_timestamp
        return totals


def _top_folder(source: Source, info: dict, key: str) -> str:
    template = info[key]
    source.path(template.split("{")[0] or ".")  # refuses an absolute template or one that climbs out of the root
    top = posixpath.normpath(template).split("/")[0]
    if "{" in top or top in ("", "."):
        raise DatasetFormatError(f"{source.url}/meta/info.json: {key} {template!r} must start with a fixed folder "
                                 "inside the dataset root (e.g. 'data/chunk-{chunk_index:03d}/...').")
    return top


def _read_json(source: Source, rel: str) -> dict:
    raw = source.read_bytes(rel)
    try:
        return json.loads(raw)
    except ValueError as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise DatasetFormatError(f"{source.url}/{rel} is not valid JSON{where}: {exc.msg if where else exc}. "
                                 "Restore the file from the dataset's origin.") from None


def _read_info(source: Source) -> dict:
    try:
        info = _read_json(source, "meta/info.json")
    except SourceFileNotFoundError:
        raise DatasetFormatError(
            f"{source.url} has no meta/info.json: point --root at a LeRobot v3.0 dataset root (the folder "
            "holding meta/, data/ and videos/)."
        ) from None
    if not isinstance(info, dict):
        raise DatasetFormatError(f"{source.url}/meta/info.json holds a JSON {type(info).__name__}, not an object.")
    version = info.get("codebase_version")
    if version != SUPPORTED_VERSION:
        raise DatasetFormatError(
            f"{source.url} is a LeRobot {version or 'unknown-version'} dataset; dl reads {SUPPORTED_VERSION} "
            "only. Convert it with LeRobot's converter (lerobot.datasets.v30.convert_dataset_v21_to_v30) "
            "or download its v3.0 revision."
        )
    for key in ("fps", "features", "data_path"):
        if key not in info:
            raise DatasetFormatError(f"{source.url}/meta/info.json has no {key!r}.")
    if any(f.get("dtype") == "video" for f in info["features"].values()) and "video_path" not in info:
        raise DatasetFormatError(f"{source.url}/meta/info.json has video features but no 'video_path'.")
    return info


def _read_parquet(source: Source, rel: str, skip_prefix: str | None = None):
    """The whole table of a small metadata parquet file (one read), leaving out columns named `skip_prefix*`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # copied into Arrow-owned memory: a buffer borrowed from a Python bytes object may be released by an Arrow
    # worker thread after the read returns, and if the interpreter is exiting by then (an error right after
    # reading metadata) that thread cannot take the GIL and the process aborts
    stream = pa.BufferOutputStream()
    stream.write(source.read_bytes(rel))
    try:
        pf = pq.ParquetFile(pa.BufferReader(stream.getvalue()))
        columns = [c for c in pf.schema_arrow.names if not (skip_prefix and c.startswith(skip_prefix))]
        return pf.read(columns=columns)
    except (pa.ArrowException, OSError) as exc:
        raise DatasetFormatError(f"{source.url}/{rel} is not a readable parquet file ({exc}). Restore it from the "
                                 "dataset's origin.") from None


def _read_tasks(source: Source, files: dict[str, int]) -> dict[int, str]:
    if "meta/tasks.parquet" not in files:
        raise DatasetFormatError(f"{source.url} has no meta/tasks.parquet.")
    table = _read_parquet(source, "meta/tasks.parquet")
    # LeRobot writes the task string as the pandas index (`__index_level_0__`); accept a `task` column too
    text_col = next((c for c in ("task", "__index_level_0__") if c in table.column_names), None)
    if text_col is None or "task_index" not in table.column_names:
        raise DatasetFormatError(
            f"{source.url}/meta/tasks.parquet needs a task_index column and the task string as a 'task' "
            f"column or pandas index; it has {table.column_names}."
        )
    return dict(zip(table.column("task_index").to_pylist(), table.column(text_col).to_pylist(), strict=True))


def _read_episodes(source: Source, info: dict, files: dict[str, int]) -> dict[int, EpisodeMeta]:
    parts = [f for f in files if f.startswith("meta/episodes/") and f.endswith(".parquet")]
    if not parts:
        raise DatasetFormatError(f"{source.url} has no meta/episodes/**/*.parquet files.")
    video_keys = [k for k, f in info["features"].items() if f.get("dtype") == "video"]
    episodes: dict[int, EpisodeMeta] = {}
    for rel in parts:
        for row in _read_parquet(source, rel, skip_prefix="stats/").to_pylist():
            try:
                ep = _episode_from_row(row, info, video_keys)
            except KeyError as exc:
                raise DatasetFormatError(f"{source.url}/{rel}: episode row lacks column {exc}.") from None
            episodes[ep.index] = ep
    return dict(sorted(episodes.items()))


def _episode_from_row(row: dict, info: dict, video_keys: list[str]) -> EpisodeMeta:
    data_path = info["data_path"].format(chunk_index=row["data/chunk_index"], file_index=row["data/file_index"])
    videos = {
        key: VideoSpan(
            info["video_path"].format(video_key=key, chunk_index=row[f"videos/{key}/chunk_index"],
                                      file_index=row[f"videos/{key}/file_index"]),
            float(row[f"videos/{key}/from_timestamp"]),
            float(row[f"videos/{key}/to_timestamp"]),
        )
        for key in video_keys
    }
    return EpisodeMeta(
        index=int(row["episode_index"]),
        length=int(row["length"]),
        dataset_from_index=int(row["dataset_from_index"]),
        dataset_to_index=int(row["dataset_to_index"]),
        data_path=data_path,
        videos=videos,
        tasks=tuple(row.get("tasks") or ()),
    )
