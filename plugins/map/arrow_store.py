"""The map loader's tabular rows: the selected episodes' rows in one memory-mapped Arrow IPC file, in selection
order, each column dense in its info.json dtype (image features as their encoded bytes), written as one record
batch per run of consecutive episodes that share a data file. Reads slice rows: an episode's columns are views of
its batch's mapped columns, made when the episode is first read (nothing is converted at start), so start-up costs
the same for ten episodes as for a million and every DataLoader worker shares the mapped pages instead of owning a
copy.

Built once per (dataset files, episodes, keys) into dl's cache folder (`tabular/`), which may be a home folder
shared by nodes: written under a unique temporary name and renamed into place (concurrent writers are safe),
and kept under a byte limit by evicting the least recently used files (`dl.kits.lru_folder`)."""

import hashlib
import json
import os
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from dl.format.columns import ArrowColumn
from dl.format.metadata import DatasetMeta
from dl.format.tabular import EpisodeArrays, episode_arrays, read_run, table_to_arrays
from dl.kits import lru_folder
from dl.kits.paths import cache_dir

FORMAT_VERSION = 4  # 4: record batches of many episodes, rows sliced on read; rows found by global index range; image
# features as binary columns
SUFFIX = ".arrow"


class ArrowEpisodeStore:
    """Per-episode column arrays backed by a memory map.

    Use `ArrowEpisodeStore.build(meta, episodes, keys)`. `arrays(e)` gives the e-th stored episode's
    `{key: array [length, *shape]}`: read-only views of the map for numeric columns, arrays converted from
    that episode's rows only for others (strings). Pickles as its path and row offsets (workers remap).

    Args:
        path: the Arrow IPC file.
        starts: int64 [episodes + 1], the first row of each episode and the total (the map positions).
    """

    def __init__(self, path: str, starts: np.ndarray):
        self.path, self.starts = path, np.asarray(starts, dtype=np.int64)
        self._reader = None
        self._batch_starts: np.ndarray | None = None
        self._batches: dict[int, dict] = {}

    @classmethod
    def build(cls, meta: DatasetMeta, episodes, keys: list[str], limit_bytes: int = 16 << 30) -> "ArrowEpisodeStore":
        """The store of `episodes` (a `dl.format.episodes.EpisodeSelection`), written unless an identical one
        exists. The file's name hashes every data file's fingerprint, each episode's index, length, first
        global index and file, the fps and the keys, so an edited dataset (data or meta/episodes) is rebuilt
        and re-verified. Afterwards the cache folder is trimmed to `limit_bytes`, least recently used first.

        Raises:
            DatasetFormatError: the rows disagree with meta/episodes (`dl.format.tabular.read_run`).
        """
        cols, at = meta.columns, episodes.positions
        files = sorted({cols.data_paths[i] for i in np.unique(cols.data_file[at]).tolist()})
        ident = hashlib.sha256(json.dumps([FORMAT_VERSION, meta.source.url, meta.fps, keys, cols.data_paths,
                                           [(f, meta.source.fingerprint(f)) for f in files]]).encode())
        for column in (cols.index, cols.length, cols.dataset_from_index, cols.data_file):
            ident.update(np.ascontiguousarray(column[at]).tobytes())
        folder = cache_dir("tabular")
        path = folder / f"{ident.hexdigest()[:32]}{SUFFIX}"
        starts = np.concatenate([[0], np.cumsum(episodes.lengths)]).astype(np.int64)
        store = cls(str(path), starts)
        if not store._open():
            _write(meta, episodes, keys, str(path))
            lru_folder.evict(folder, SUFFIX, limit_bytes, keep=path)
        lru_folder.touch(path)
        return store

    def __getstate__(self):
        return {"path": self.path, "starts": self.starts}

    def __setstate__(self, state):
        self.__init__(state["path"], state["starts"])

    def _open(self) -> bool:
        """Map the file (once per process); False when it does not exist (not built yet, or evicted) or does not
        hold the selection's rows (then it is rebuilt)."""
        if self._reader is None:
            try:
                reader = pa.ipc.open_file(pa.memory_map(self.path, "r"))
            except (FileNotFoundError, pa.ArrowInvalid):
                return False
            rows = [reader.get_batch(b).num_rows for b in range(reader.num_record_batches)]
            starts = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
            if starts[-1] != self.starts[-1]:
                return False
            self._reader, self._batch_starts = reader, starts
        return True

    def runs(self, keys: list[str]) -> Iterator[tuple[int, int, EpisodeArrays]]:
        """`(first episode, end episode, {key: array [rows, *shape]})` per record batch: the numeric columns `keys`
        of the stored episodes [first, end) at once (for checks over the whole selection,
        `dl.format.selection_checks`). Read batch by batch into memory freed after each, not through the map: a
        pass over every row would otherwise leave the whole file resident in this process, which DataLoader workers
        fork from (at a million episodes, most of a gigabyte of RSS)."""
        if self._reader is None and not self._open():
            raise FileNotFoundError(f"{self.path} is gone (deleted from the cache folder); build the loader again.")
        bounds = np.searchsorted(self.starts, self._batch_starts)
        with pa.OSFile(self.path) as source:
            reader = pa.ipc.open_file(source)
            for b in range(len(self._batch_starts) - 1):
                batch = reader.get_batch(b).select([k for k in keys if k in reader.schema.names])
                columns = {k: v for k, v in _columns(batch).items() if isinstance(v, np.ndarray)}
                del batch
                yield int(bounds[b]), int(bounds[b + 1]), columns
                del columns
        pa.default_memory_pool().release_unused()

    def arrays(self, e: int) -> EpisodeArrays:
        """Columns of the e-th stored episode (in the order given to `build`).

        Raises:
            FileNotFoundError: the file was deleted before this process first mapped it.
        """
        if self._reader is None and not self._open():
            raise FileNotFoundError(f"{self.path} is gone (deleted from the cache folder); build the loader again.")
        first, last = int(self.starts[e]), int(self.starts[e + 1])
        b = int(np.searchsorted(self._batch_starts, first, side="right")) - 1
        columns = self._batches.get(b)
        if columns is None:
            columns = self._batches[b] = _columns(self._reader.get_batch(b))
        lo, hi = first - int(self._batch_starts[b]), last - int(self._batch_starts[b])
        return {key: values[lo:hi] if isinstance(values, np.ndarray) else _convert(values.slice(lo, hi - lo), key)
                for key, values in columns.items()}


NUMPY_TYPES = {t: np.dtype(t.to_pandas_dtype()) for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(),
                                                         pa.uint16(), pa.uint32(), pa.uint64(), pa.float16(),
                                                         pa.float32(), pa.float64())}
"""The Arrow types whose buffers numpy reads as they are."""


def _columns(batch: pa.RecordBatch) -> dict:
    """A batch's numeric columns as numpy views of the map (fixed-size lists reshaped, no copy); other columns stay
    Arrow arrays, converted per episode."""
    out = {}
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        view = _view(column)
        out[name] = view if view is not None else column
    return out


def _view(column: pa.Array) -> np.ndarray | None:
    """`column` (a numeric type, or fixed-size lists of one, without nulls) as a read-only numpy view
    `[rows, *shape]` of its buffer; None for other columns. Read from the buffer, not with `to_numpy`, which
    imports pandas (30-50 MB) into every DataLoader worker that reads a sample."""
    shape, leaf = [], column
    while pa.types.is_fixed_size_list(leaf.type) and not leaf.null_count:
        shape.append(leaf.type.list_size)
        leaf = leaf.flatten()
    dtype = NUMPY_TYPES.get(leaf.type)
    if dtype is None or leaf.null_count:
        return None
    values = np.frombuffer(leaf.buffers()[1], dtype=dtype, count=len(leaf), offset=leaf.offset * dtype.itemsize)
    return values.reshape(len(column), *shape)


def _convert(values: pa.Array, name: str) -> np.ndarray:
    return table_to_arrays(pa.record_batch({name: values}))[name]


def _write(meta: DatasetMeta, episodes, keys: list[str], path: str) -> None:
    """Read every selected episode's rows, one pass per run of consecutive episodes in one data file, and write
    each run as one record batch, in selection order, under a temporary name renamed onto `path`."""
    tmp = lru_folder.temp_path(path)
    cols, at = meta.columns, episodes.positions
    runs = np.split(np.arange(len(at)), np.flatnonzero(np.diff(cols.data_file[at])) + 1) if len(at) else []
    writer = None
    try:
        for run in runs:
            group = list(episodes[int(run[0]):int(run[-1]) + 1])
            where = f"{meta.source.url}/{group[0].data_path} (episodes {group[0].index}-{group[-1].index})"
            batch = _dense_batch(episode_arrays(read_run(meta, group, keys), meta.features, where))
            writer = writer or pa.ipc.new_file(tmp, batch.schema)
            writer.write_batch(batch)
        if writer is None:
            writer = pa.ipc.new_file(tmp, pa.schema([]))
        writer.close()
        os.replace(tmp, path)
    finally:
        lru_folder.discard(tmp)


def _dense_batch(arrays: EpisodeArrays) -> pa.RecordBatch:
    return pa.record_batch({key: _dense_array(values) for key, values in arrays.items()})


def _dense_array(values: np.ndarray | ArrowColumn) -> pa.Array:
    if isinstance(values, ArrowColumn):
        return values.array
    if values.dtype == object:
        return pa.array(values.tolist())
    arr = pa.array(np.ascontiguousarray(values).reshape(-1))
    for size in reversed(values.shape[1:]):
        arr = pa.FixedSizeListArray.from_arrays(arr, size)
    return arr
