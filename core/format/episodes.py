"""Episode metadata as columns: one numpy array per field of `meta/episodes/`, one entry per episode in
ascending episode index, so a dataset of a million episodes costs a few arrays, not a million Python objects.

`EpisodeColumns` is built once from the meta/episodes tables (vectorized: paths and task lists are
dictionary-encoded, each distinct one formatted once), written to an Arrow IPC file (`write`) and mapped back
(`open`): processes that open the same file share its pages, and a pickled `EpisodeColumns` that came from a
file is just its path. `EpisodeMeta` objects are views built on demand (`episode(position)`), for code that
wants one episode's fields by name; hot paths (loaders, samplers, partitions) read the arrays.
"""

import copy
import json
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..contracts.errors import DatasetFormatError
from .features import camera_keys

FORMAT = "dl.episodes/1"
"""Written into the Arrow file's schema metadata; a file of another format is refused."""


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


class EpisodeColumns:
    """Every episode's metadata as arrays of one entry per episode (its *position*), ascending by index.

    Attributes:
        index, length, dataset_from_index, dataset_to_index: int64 [E].
        data_file: int32 [E], each episode's data file as a position in `data_paths`.
        video_file: `{camera key: int32 [E]}`, positions in `video_paths[key]`.
        from_timestamp, to_timestamp: `{camera key: float64 [E]}`, seconds in the video file's timeline.
        task_set: int32 [E], positions in `task_sets` (each a tuple of task strings).
        data_paths, video_paths, task_sets: the distinct values, each once.
        path: the Arrow file the arrays are mapped from (None: they live in this process's memory).
    """

    def __init__(self, arrays: dict[str, np.ndarray], strings: dict, path: str | None = None):
        self.arrays, self.path = arrays, path
        self.video_keys: list[str] = list(strings["video_paths"])
        self.data_paths: list[str] = strings["data_paths"]
        self.video_paths: dict[str, list[str]] = strings["video_paths"]
        self.task_sets: list[tuple[str, ...]] = [tuple(t) for t in strings["task_sets"]]
        self.index, self.length = arrays["index"], arrays["length"]
        self.dataset_from_index, self.dataset_to_index = arrays["dataset_from_index"], arrays["dataset_to_index"]
        self.data_file, self.task_set = arrays["data_file"], arrays["task_set"]
        self.video_file = {k: arrays[f"videos/{k}/file"] for k in self.video_keys}
        self.from_timestamp = {k: arrays[f"videos/{k}/from_timestamp"] for k in self.video_keys}
        self.to_timestamp = {k: arrays[f"videos/{k}/to_timestamp"] for k in self.video_keys}

    def __len__(self) -> int:
        return len(self.index)

    def __repr__(self) -> str:
        return f"EpisodeColumns({len(self)} episodes{f', mapped from {self.path}' if self.path else ''})"

    # ------------------------------------------------------------------------------------ lookups
    def episode(self, position: int) -> EpisodeMeta:
        """The episode at `position` (0..E-1, not its index) as an `EpisodeMeta` view."""
        return self.episodes(np.array([position]))[0]

    def episodes(self, positions: np.ndarray) -> list[EpisodeMeta]:
        """The episodes at `positions` (int [S]) as `EpisodeMeta` views, each column read once for all of them."""
        at = np.asarray(positions, dtype=np.int64)
        spans = [[VideoSpan(self.video_paths[key][f], a, b) for f, a, b in
                  zip(self.video_file[key][at].tolist(), self.from_timestamp[key][at].tolist(),
                      self.to_timestamp[key][at].tolist(), strict=True)] for key in self.video_keys]
        columns = (self.index[at].tolist(), self.length[at].tolist(), self.dataset_from_index[at].tolist(),
                   self.dataset_to_index[at].tolist(), self.data_file[at].tolist(), self.task_set[at].tolist())
        return [EpisodeMeta(index, length, lo, hi, self.data_paths[data],
                            dict(zip(self.video_keys, videos, strict=True)), self.task_sets[tasks])
                for index, length, lo, hi, data, tasks, *videos in zip(*columns, *spans, strict=True)]

    def positions(self, indices) -> tuple[np.ndarray, np.ndarray]:
        """(positions of the given episode indices that exist, the indices that do not), both int64."""
        wanted = np.asarray(indices, dtype=np.int64).reshape(-1)
        at = np.minimum(np.searchsorted(self.index, wanted), max(len(self) - 1, 0))
        found = (at < len(self)) & (self.index[at] == wanted) if len(self) else np.zeros(len(wanted), dtype=bool)
        return at[found].astype(np.int64), wanted[~found]

    def position(self, index: int) -> int | None:
        """The position of episode `index`, or None when there is no such episode."""
        found, _ = self.positions([index])
        return int(found[0]) if len(found) else None

    # ------------------------------------------------------------------------------------ files
    def write(self, path: str) -> None:
        """Write the columns as an Arrow IPC file at `path` (atomically: a unique temporary name, then a rename,
        so concurrent writers of the same file never leave a torn one)."""
        strings = {"data_paths": self.data_paths, "video_paths": self.video_paths,
                   "task_sets": [list(t) for t in self.task_sets]}
        table = pa.table(self.arrays).replace_schema_metadata({"format": FORMAT, "strings": json.dumps(strings)})
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"  # unique across processes and nodes sharing the folder
        try:
            with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    @classmethod
    def open(cls, path: str) -> "EpisodeColumns":
        """Map an Arrow file written by `write`: the arrays are read-only views of the mapped pages.

        Raises:
            DatasetFormatError: not such a file (another format, or unreadable).
        """
        try:
            table = pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
        except (pa.ArrowException, OSError) as exc:
            raise DatasetFormatError(f"{path} is not a readable dl episode-metadata file ({exc}).") from None
        meta = table.schema.metadata or {}
        if meta.get(b"format") != FORMAT.encode():
            raise DatasetFormatError(f"{path} holds {meta.get(b'format', b'no format').decode()}, not {FORMAT}.")
        arrays = {name: _numpy(table.column(name)) for name in table.column_names}
        return cls(arrays, json.loads(meta[b"strings"]), str(path))

    def with_cameras(self, keys: list[str]) -> "EpisodeColumns":
        """These columns with only the cameras `keys` (of `video_keys`, in their order) in each `EpisodeMeta`'s
        `videos`: a view sharing the arrays (`dl.format.feature_selection`)."""
        out = copy.copy(self)
        out.video_keys = [k for k in self.video_keys if k in keys]
        return out

    def __getstate__(self):
        cameras = {"cameras": self.video_keys}
        if self.path is not None:  # processes map the same file: nothing else crosses
            return {"path": self.path, **cameras}
        return {"arrays": self.arrays, "strings": {"data_paths": self.data_paths, "video_paths": self.video_paths,
                                                   "task_sets": self.task_sets}, **cameras}

    def __setstate__(self, state):
        if "path" in state:
            self.__dict__.update(vars(EpisodeColumns.open(state["path"])))
        else:
            self.__init__(state["arrays"], state["strings"])
        self.video_keys = [k for k in self.video_keys if k in state.get("cameras", self.video_keys)]

    # ------------------------------------------------------------------------------------ building
    @classmethod
    def from_tables(cls, url: str, info: dict, tables: list[tuple[str, pa.Table]]) -> "EpisodeColumns":
        """The columns of the `meta/episodes` tables (`(relative path, table)` per file), sorted by episode index
        (an index listed twice keeps its last row). Paths come from info.json's `data_path` / `video_path`
        templates, formatted once per distinct (chunk, file); `tasks` (a list of strings per episode) is
        optional.

        Raises:
            DatasetFormatError: a file lacks a column, or a numeric column has empty (null) values.
        """
        video_keys = camera_keys(info["features"], "video")  # less the cameras dl leaves out (depth maps)
        ints = ["episode_index", "length", "dataset_from_index", "dataset_to_index", "data/chunk_index",
                "data/file_index", *(f"videos/{k}/{c}" for k in video_keys for c in ("chunk_index", "file_index"))]
        floats = [f"videos/{k}/{c}" for k in video_keys for c in ("from_timestamp", "to_timestamp")]
        table = pa.concat_tables([_columns(url, rel, t, ints, floats) for rel, t in tables]).combine_chunks()
        order = _last_of_each(_numpy(table.column("episode_index")))
        if order is not None:
            table = table.take(pa.array(order))
        col = {name: _numpy(table.column(name)) for name in ints + floats}
        arrays = {"index": col["episode_index"], "length": col["length"],
                  "dataset_from_index": col["dataset_from_index"], "dataset_to_index": col["dataset_to_index"]}
        arrays["data_file"], data_paths = _paths(info["data_path"], col["data/chunk_index"], col["data/file_index"])
        video_paths = {}
        for key in video_keys:
            template = info["video_path"].replace("{video_key}", key)
            arrays[f"videos/{key}/file"], video_paths[key] = _paths(
                template, col[f"videos/{key}/chunk_index"], col[f"videos/{key}/file_index"])
            for c in ("from_timestamp", "to_timestamp"):
                arrays[f"videos/{key}/{c}"] = col[f"videos/{key}/{c}"]
        arrays["task_set"], task_sets = _task_sets(table.column("tasks"))
        return cls(arrays, {"data_paths": data_paths, "video_paths": video_paths, "task_sets": task_sets})


_NUMPY_TYPES = {pa.int64(): np.dtype(np.int64), pa.int32(): np.dtype(np.int32), pa.float64(): np.dtype(np.float64)}


def _numpy(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A numeric column without nulls as a read-only numpy view of its Arrow buffer (without `to_numpy`, which
    imports pandas: 30-50 MB in a process that DataLoader workers fork from); others converted."""
    array = column if isinstance(column, pa.Array) else (
        column.combine_chunks() if column.num_chunks != 1 else column.chunk(0))
    dtype = _NUMPY_TYPES.get(array.type)
    if dtype is None or array.null_count:
        return array.to_numpy(zero_copy_only=False)
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def _columns(url: str, rel: str, table: pa.Table, ints: list[str], floats: list[str]) -> pa.Table:
    """The columns `from_tables` reads, typed int64 / float64 / list<string>, checked for presence and nulls."""
    missing = [name for name in ints + floats if name not in table.column_names]
    if missing:
        raise DatasetFormatError(f"{url}/{rel}: episode rows lack column(s) {', '.join(repr(m) for m in missing)}.")
    out = {}
    for name, kind in [*((n, pa.int64()) for n in ints), *((n, pa.float64()) for n in floats)]:
        column = table.column(name)
        if column.null_count:
            raise DatasetFormatError(f"{url}/{rel}: column {name!r} has {column.null_count} empty value(s); restore "
                                     "meta/episodes from the dataset's origin.")
        out[name] = column.cast(kind) if column.type != kind else column
    tasks = table.column("tasks") if "tasks" in table.column_names else pa.nulls(table.num_rows, pa.list_(pa.string()))
    out["tasks"] = tasks.cast(pa.list_(pa.string())) if tasks.type != pa.list_(pa.string()) else tasks
    return pa.table(out)


def _last_of_each(index: np.ndarray) -> np.ndarray | None:
    """Row order by ascending episode index, keeping the last row of an index listed more than once; None when
    the rows are in that order already (the usual case)."""
    if len(index) < 2 or bool((index[1:] > index[:-1]).all()):
        return None
    order = np.argsort(index, kind="stable")
    keep = np.ones(len(order), dtype=bool)
    keep[:-1] = index[order][1:] != index[order][:-1]
    return order[keep]


def distinct_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct rows of a non-negative int matrix [N, K], each row's position among them), as
    `np.unique(matrix, axis=0, return_inverse=True)` but through one int64 key per row when the values fit
    (a single-key sort instead of a lexicographic one)."""
    matrix = np.asarray(matrix, dtype=np.int64)
    if not matrix.size:
        return matrix[:0], np.zeros(len(matrix), dtype=np.int64)
    bases = matrix.max(axis=0) + 1
    if float(np.prod(bases.astype(np.float64))) >= 2.0**62:
        distinct, which = np.unique(matrix, axis=0, return_inverse=True)
        return distinct, which.reshape(-1)
    weights = np.concatenate([np.cumprod(bases[::-1])[::-1][1:], [1]]).astype(np.int64)
    keys, which = np.unique(matrix @ weights, return_inverse=True)
    distinct = (keys[:, None] // weights) % bases
    return distinct, which.reshape(-1)


def _paths(template: str, chunks: np.ndarray, files: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """(per row, the position of its path in the list; the distinct paths), each formatted once."""
    if not len(chunks):
        return np.zeros(0, dtype=np.int32), []
    pairs, which = distinct_rows(np.stack([chunks, files], axis=1))
    paths = [template.format(chunk_index=int(c), file_index=int(f)) for c, f in pairs]
    return which.astype(np.int32), paths


def _task_sets(tasks: pa.ChunkedArray) -> tuple[np.ndarray, list[tuple[str, ...]]]:
    """(per row, the position of its task tuple; the distinct tuples), without a Python object per row: task
    strings become ids, each row's ids a padded row of a matrix, and the distinct matrix rows the tuples."""
    lists = tasks.combine_chunks() if tasks.num_chunks != 1 else tasks.chunk(0)
    if not len(lists):
        return np.zeros(0, dtype=np.int32), [()]
    encoded = pc.dictionary_encode(lists.flatten())  # a null row (no tasks) has no values
    words = encoded.dictionary.to_pylist()
    ids = _numpy(encoded.indices).astype(np.int64)
    if lists.null_count:  # rows without tasks: no values
        lengths = lists.value_lengths().fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    else:
        lengths = np.diff(_numpy(lists.offsets)).astype(np.int64)
    width = int(lengths.max()) if len(lengths) else 0
    matrix = np.zeros((len(lists), max(width, 1)), dtype=np.int64)  # 0: no task, k: words[k - 1]
    rows = np.repeat(np.arange(len(lists)), lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    matrix[rows, np.arange(len(ids)) - starts[rows]] = ids + 1
    distinct, which = distinct_rows(matrix)
    sets = [tuple(words[i - 1] for i in row.tolist() if i > 0) for row in distinct]
    return which.astype(np.int32), sets


class EpisodeMapping(Mapping):
    """The episodes by index, read-only (`DatasetMeta.episodes`): `meta.episodes[i]` builds the `EpisodeMeta`
    view of episode `i` on demand, iteration gives the indices in ascending order. Raises KeyError for an
    index the dataset does not have."""

    def __init__(self, columns: EpisodeColumns):
        self.columns = columns

    def __getitem__(self, index: int) -> EpisodeMeta:
        position = self.columns.position(index) if isinstance(index, int | np.integer) else None
        if position is None:
            raise KeyError(index)
        return self.columns.episode(position)

    def __contains__(self, index) -> bool:
        return isinstance(index, int | np.integer) and self.columns.position(index) is not None

    def __iter__(self) -> Iterator[int]:
        return iter(self.columns.index.tolist())

    def __len__(self) -> int:
        return len(self.columns)

    def __repr__(self) -> str:
        return f"<{len(self)} episodes>"


def episode_lengths(episodes) -> np.ndarray:
    """Frames per episode of a loader's `episodes`: the selection's array (`dl.format.episodes.EpisodeSelection`),
    or each `EpisodeMeta`'s length for a loader that lists them."""
    lengths = getattr(episodes, "lengths", None)
    return lengths if lengths is not None else np.array([e.length for e in episodes], dtype=np.int64)


def episodes_in_file(episodes, key: str, path: str):
    """The episodes of `episodes` whose camera `key` is stored in the video file `path`, in order: by column for a
    selection (`EpisodeSelection.in_video_file`), one by one for a plain list of `EpisodeMeta`."""
    if isinstance(episodes, EpisodeSelection):
        return episodes.in_video_file(key, path)
    return [ep for ep in episodes if ep.videos[key].path == path]


ITER_EPISODES = 4096
"""Episodes an `EpisodeSelection` builds at a time while iterated (`EpisodeColumns.episodes`)."""


class EpisodeSelection(Sequence):
    """Some episodes of a dataset, in the order given (the loaders' selection: ascending), as a read-only
    sequence of `EpisodeMeta` views built on demand, with their fields as arrays for vectorized code.

    Attributes:
        columns: the dataset's `EpisodeColumns`.
        positions: int64 [S], the selected episodes' positions in `columns`.
    """

    def __init__(self, columns: EpisodeColumns, positions: np.ndarray):
        self.columns, self.positions = columns, np.asarray(positions, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, item):
        if isinstance(item, slice):
            return EpisodeSelection(self.columns, self.positions[item])
        return self.columns.episode(int(self.positions[item]))

    def __iter__(self) -> Iterator[EpisodeMeta]:
        for start in range(0, len(self.positions), ITER_EPISODES):
            yield from self.columns.episodes(self.positions[start:start + ITER_EPISODES])

    def __repr__(self) -> str:
        return f"<{len(self)} selected episodes>"

    def __eq__(self, other) -> bool:
        """Equal to any sequence of the same `EpisodeMeta`s in the same order (as the list it stands for)."""
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None

    @cached_property
    def index(self) -> np.ndarray:
        """int64 [S]: the episode indices."""
        return self.columns.index[self.positions]

    @cached_property
    def lengths(self) -> np.ndarray:
        """int64 [S]: frames per episode."""
        return self.columns.length[self.positions]

    @cached_property
    def dataset_from_index(self) -> np.ndarray:
        """int64 [S]: each episode's first global frame index."""
        return self.columns.dataset_from_index[self.positions]

    def in_video_file(self, key: str, path: str) -> "EpisodeSelection":
        """The selected episodes whose camera `key` is stored in the video file `path`, in selection order."""
        paths = self.columns.video_paths[key]
        file = paths.index(path) if path in paths else -1
        return EpisodeSelection(self.columns, self.positions[self.columns.video_file[key][self.positions] == file])
