"""Reading an episode's tabular rows from its data parquet file, and turning Arrow columns into numpy.

Rows are located by the `episode_index` column of only the row groups whose statistics admit the
episode, so a file holding many episodes is never read whole to get one of them."""

import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..contracts.errors import DatasetFormatError
from .checks import check_episode_table
from .metadata import DEFAULT_KEYS, DatasetMeta, EpisodeMeta

EpisodeArrays = dict[str, np.ndarray]
"""One episode's columns: `{key: array [length, *shape]}` in the feature's dtype."""


def tabular_keys(meta: DatasetMeta) -> list[str]:
    """The non-video feature keys a sample carries, in info.json order (always including DEFAULT_KEYS).
    Features of dtype "image" (PNG bytes in parquet) are not supported and left out with a warning."""
    keys = []
    for key, feature in meta.features.items():
        if feature.get("dtype") == "video":
            continue
        if feature.get("dtype") == "image":
            warnings.warn(f"feature {key!r} has dtype 'image' (frames stored in parquet); dl leaves it out.",
                          stacklevel=2)
            continue
        keys.append(key)
    return keys + [k for k in DEFAULT_KEYS if k not in keys]


def read_episode_tables(meta: DatasetMeta, episodes: list[EpisodeMeta], columns: list[str]) -> dict[int, pa.Table]:
    """Read the rows of several episodes that share one data file, with one pass over that file.

    Only row groups whose `episode_index` statistics admit an episode are touched; their `episode_index`
    column locates the rows, then the columns are streamed in batches and the stream stops after the last
    wanted row, so an episode in a large row group holding many episodes costs a partial read of it.

    Returns:
        `{episode index: table}` with exactly `length` rows each, in frame order.

    Raises:
        DatasetFormatError: the episodes are not all in one file, the file is not readable parquet (truncated,
            corrupt), a column is missing, the file's rows for an episode are not `length` contiguous rows
            starting at `dataset_from_index`, or their frame_index / timestamp are wrong
            (`dl.format.checks.check_episode_table`).
    """
    paths = {ep.data_path for ep in episodes}
    if len(paths) != 1:
        raise ValueError(f"read_episode_tables needs episodes of one file, got {sorted(paths)}")
    path = paths.pop()
    where = f"{meta.source.url}/{path}"
    try:
        with meta.source.open(path) as f:
            pf = pq.ParquetFile(f)
            missing = [c for c in columns if c not in pf.schema_arrow.names]
            if missing:
                raise DatasetFormatError(f"{where} lacks column(s) {', '.join(missing)} listed in info.json.")
            groups = [g for g in range(pf.num_row_groups) if _group_may_hold(pf, g, {ep.index for ep in episodes})]
            # no Arrow threads: the file object's buffers belong to Python (see metadata._read_parquet)
            found = pf.read_row_groups(groups, columns=["episode_index"], use_threads=False).column(0).to_numpy()
            spans = {ep.index: _row_span(found, ep, where) for ep in episodes}
            table = _read_rows(pf, groups, columns, max(end for _, end in spans.values()))
    except (pa.ArrowException, OSError, EOFError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise DatasetFormatError(f"{where} is not a readable parquet file ({exc}); it may be truncated or "
                                 "corrupt. Re-download it, or leave out the episodes it holds.") from None
    out = {}
    for ep in episodes:
        part = table.slice(spans[ep.index][0], ep.length)
        if "index" in columns and part.column("index")[0].as_py() != ep.dataset_from_index:
            raise DatasetFormatError(
                f"{where}: episode {ep.index} starts at index "
                f"{part.column('index')[0].as_py()}, meta/episodes says {ep.dataset_from_index}."
            )
        if "frame_index" in columns and "timestamp" in columns:
            check_episode_table(where, ep.index, meta.fps, part.column("frame_index").to_numpy(),
                                part.column("timestamp").to_numpy())
        out[ep.index] = part
    return out


def _row_span(found: np.ndarray, ep: EpisodeMeta, where: str) -> tuple[int, int]:
    rows = np.flatnonzero(found == ep.index)
    contiguous = bool(len(rows)) and rows[-1] - rows[0] + 1 == len(rows)
    if len(rows) != ep.length or not contiguous:
        raise DatasetFormatError(f"{where}: episode {ep.index} has {len(rows)} rows (contiguous: {contiguous}), "
                                 f"meta/episodes says {ep.length}.")
    return int(rows[0]), int(rows[-1]) + 1


def _read_rows(pf: pq.ParquetFile, groups: list[int], columns: list[str], end: int,
               batch_rows: int = 4096) -> pa.Table:
    """The first `end` rows of the given row groups (concatenated), streamed and stopped early."""
    batches, rows = [], 0
    for batch in pf.iter_batches(batch_size=batch_rows, row_groups=groups, columns=columns, use_threads=False):
        batches.append(batch)
        rows += batch.num_rows
        if rows >= end:
            break
    return pa.Table.from_batches(batches, schema=pf.schema_arrow.select(columns) if not batches else None)


def _group_may_hold(pf: pq.ParquetFile, group: int, episodes: set[int]) -> bool:
    meta = pf.metadata.row_group(group)
    leaf = next(i for i in range(meta.num_columns) if meta.column(i).path_in_schema == "episode_index")
    stats = meta.column(leaf).statistics
    if stats is None or not stats.has_min_max:
        return True
    return any(stats.min <= e <= stats.max for e in episodes)


def episode_arrays(table: pa.Table, features: dict) -> EpisodeArrays:
    """`table_to_arrays` with numeric columns cast to their info.json dtype (what LeRobot returns)."""
    arrays = table_to_arrays(table)
    for key, values in arrays.items():
        dtype = features.get(key, {}).get("dtype")
        if values.dtype != object and dtype in NUMERIC_DTYPES:
            arrays[key] = values.astype(dtype, copy=False)
    return arrays


NUMERIC_DTYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                  "uint64", "bool"}


def table_to_arrays(table: pa.Table | pa.RecordBatch) -> EpisodeArrays:
    """Columns as numpy arrays `[rows, *shape]`, zero-copy where Arrow allows (numeric, no nulls).

    List columns (`list<float32>`, nested lists) become one dense array; string columns become object
    arrays.

    Raises:
        DatasetFormatError: a list column's rows have unequal lengths.
    """
    return {name: _column_to_numpy(table.column(name), name) for name in table.column_names}


def _column_to_numpy(column: pa.ChunkedArray | pa.Array, name: str) -> np.ndarray:
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    n, shape = len(arr), []
    while pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type) or pa.types.is_fixed_size_list(arr.type):
        if pa.types.is_fixed_size_list(arr.type):
            shape.append(arr.type.list_size)
        else:
            lengths = np.unique(arr.value_lengths().to_numpy(zero_copy_only=False))
            if len(lengths) > 1:
                raise DatasetFormatError(f"column {name!r} has rows of unequal length or nulls: {lengths[:5]}.")
            shape.append(int(lengths[0]) if len(lengths) else 0)
        arr = arr.flatten()
    return arr.to_numpy(zero_copy_only=False).reshape(n, *shape)
