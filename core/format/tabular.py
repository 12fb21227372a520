"""Reading an episode's tabular rows from its data parquet file.

Rows are found by the episode's global `index` range (`dataset_from_index`, `dataset_to_index`), as LeRobot finds
them, in the file meta/episodes names or the neighbour that holds them (`dl.format.locate`). Only the row groups
whose `index` statistics admit the range are read, and reading stops after the last wanted row, so a file holding
many episodes is never read whole to get one of them."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..contracts.errors import DatasetFormatError
from .columns import (  # noqa: F401
    ArrowColumn,
    EpisodeArrays,
    ImageColumn,
    check_schema,
    episode_arrays,
    table_to_arrays,
)
from .locate import data_file_of, file_index, rows_of
from .metadata import DEFAULT_KEYS, DatasetMeta, EpisodeMeta


def tabular_keys(meta: DatasetMeta) -> list[str]:
    """The non-camera feature keys a sample carries, in info.json order (always including DEFAULT_KEYS); cameras
    (`meta.camera_keys`) and the features dl leaves out (`meta.left_out`) are not among them."""
    keys = [k for k, f in meta.features.items()
            if f.get("dtype") not in ("video", "image") and k not in meta.left_out]
    return keys + [k for k in DEFAULT_KEYS if k not in keys]


def read_episode_tables(meta: DatasetMeta, episodes: list[EpisodeMeta], columns: list[str]) -> dict[int, pa.Table]:
    """Read the rows of several episodes meta/episodes places in one data file, with one pass over each file that
    holds them (that file, or for an episode it misplaces, the neighbour holding its global index range:
    `dl.format.locate`, warned once).

    Only row groups whose `index` statistics admit an episode's range are touched; their `index` and
    `episode_index` columns locate the rows, then the columns are streamed in batches and the stream stops after
    the last wanted row.

    Returns:
        `{episode index: table}` with exactly `length` rows each, in frame order, in the order given.

    Raises:
        DatasetFormatError: the episodes are not all in one file, the file is not readable parquet (truncated,
            corrupt), a column is missing or of the wrong kind (`dl.format.columns.check_schema`), or the rows
            holding the episode's global index range are not `length` contiguous rows of that episode
            (`dl.format.locate.rows_of`).
    """
    return {index: table.slice(start, end - start) for index, (table, start, end) in
            _located(meta, episodes, columns).items()}


def read_run(meta: DatasetMeta, episodes: list[EpisodeMeta], columns: list[str]) -> pa.Table:
    """The rows of `episodes` (of one data file, as `read_episode_tables` reads them) as one table, in the order
    given: one slice of what was read where each episode's rows follow the previous one's (as LeRobot writes them),
    else the episodes' slices concatenated. Raises as `read_episode_tables`."""
    parts = list(_located(meta, episodes, columns).values())
    table, first, _ = parts[0]
    if all(t is table and start == end for (t, start, _), (_, _, end) in zip(parts[1:], parts, strict=False)):
        return table.slice(first, parts[-1][2] - first)
    return pa.concat_tables([t.slice(start, end - start) for t, start, end in parts])


def _located(meta: DatasetMeta, episodes: list[EpisodeMeta], columns: list[str]) -> dict[int, tuple]:
    """`{episode index: (table read, first row, end row)}` in the order given (`read_episode_tables`)."""
    paths = {ep.data_path for ep in episodes}
    if len(paths) != 1:
        raise ValueError(f"read_episode_tables needs episodes of one file, got {sorted(paths)}")
    named = paths.pop()
    out: dict[int, tuple] = {}
    elsewhere: dict[str, list[EpisodeMeta]] = {}
    out.update(_read_file(meta, named, episodes, columns, elsewhere))
    for path, moved in elsewhere.items():
        out.update(_read_file(meta, path, moved, columns, None))
    return {ep.index: out[ep.index] for ep in episodes}


def _read_file(meta: DatasetMeta, path: str, episodes: list[EpisodeMeta], columns: list[str],
               elsewhere: dict[str, list[EpisodeMeta]] | None) -> dict[int, tuple]:
    """`{episode index: (table, first row, end row)}` of the episodes of `episodes` that `path` holds; the others are
    put in `elsewhere` by the file that holds them (None: every episode must be here)."""
    where = f"{meta.source.url}/{path}"
    try:
        with meta.source.open(path) as f:
            pf = pq.ParquetFile(f)
            check_schema(where, pf.schema_arrow, meta.features, columns)
            index = file_index(meta, path, pf)
            mine = []
            for ep in episodes:
                if elsewhere is not None and ep.length and not index.may_hold(ep.dataset_from_index,
                                                                              ep.dataset_to_index - 1):
                    elsewhere.setdefault(data_file_of(meta, ep), []).append(ep)
                else:
                    mine.append(ep)
            if not mine:
                return {}
            groups = sorted({g for ep in mine for g in index.groups_of(ep)})
            # no Arrow threads: the file object's buffers belong to Python (see meta_files.read_parquet)
            located = pf.read_row_groups(groups, columns=["index", "episode_index"], use_threads=False)
            found, owners = located.column("index").to_numpy(), located.column("episode_index").to_numpy()
            spans = rows_of(found, owners, mine)
            for span in spans.values():
                if isinstance(span, str):
                    raise DatasetFormatError(f"{where}: {span}. meta/episodes and the data disagree; restore them "
                                             "from the dataset's origin, or leave the episode out.")
            present = [c for c in columns if c in pf.schema_arrow.names]  # less DROPPED_BY_ANNOTATION's
            table = _read_rows(pf, groups, present, max(end for _, end in spans.values()))
    except (pa.ArrowException, OSError, EOFError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise DatasetFormatError(f"{where} is not a readable parquet file ({exc}); it may be truncated or "
                                 "corrupt. Re-download it, or leave out the episodes it holds.") from None
    return {ep.index: (table, spans[ep.index][0], spans[ep.index][0] + ep.length) for ep in mine}


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


def read_episode_arrays(meta: DatasetMeta, episode: EpisodeMeta, keys: list[str]) -> EpisodeArrays:
    """One episode's columns `keys` as arrays of their own (`episode_arrays`), not views of the batch they were
    read in (which would keep the whole batch alive): what a loader holding a few episodes at a time keeps."""
    where = f"{meta.source.url}/{episode.data_path} (episode {episode.index})"
    table = read_episode_tables(meta, [episode], keys)[episode.index]
    arrays = episode_arrays(table, meta.features, where)
    return {k: v.copy() if isinstance(v, ArrowColumn) else np.array(v) for k, v in arrays.items()}
