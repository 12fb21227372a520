"""Reading the metadata files of a LeRobot v3.0 dataset through a Source, each in one read, checked as they are read:
`meta/info.json` (version, fps, features, path templates), any JSON file, the small metadata parquet files
(`meta/tasks.parquet`, `meta/subtasks.parquet`, `meta/episodes/**/*.parquet`); `dl.format.metadata.DatasetMeta.load`
assembles them."""

import json
import math
import posixpath

import pyarrow as pa

from ..contracts.errors import DatasetFormatError, DlError, SourceFileNotFoundError
from ..contracts.source import Source
from .episodes import EpisodeColumns
from .features import check_features

SUPPORTED_VERSION = "v3.0"


def top_folder(source: Source, info: dict, key: str) -> str:
    """The fixed top folder of info.json's path template `key` (`data_path`, `video_path`).

    Raises:
        DatasetFormatError: the template starts with a placeholder, or leaves the root.
    """
    template = info[key]
    source.path(template.split("{")[0] or ".")  # refuses an absolute template or one that climbs out of the root
    top = posixpath.normpath(template).split("/")[0]
    if "{" in top or top in ("", "."):
        raise DatasetFormatError(f"{source.url}/meta/info.json: {key} {template!r} must start with a fixed folder "
                                 "inside the dataset root (e.g. 'data/chunk-{chunk_index:03d}/...').")
    return top


def read_json(source: Source, rel: str) -> dict:
    """The JSON file `rel`, parsed.

    Raises:
        DatasetFormatError: it is not valid JSON (the message gives the line and column).
    """
    raw = source.read_bytes(rel)
    try:
        return json.loads(raw)
    except ValueError as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise DatasetFormatError(f"{source.url}/{rel} is not valid JSON{where}: {exc.msg if where else exc}. "
                                 "Restore the file from the dataset's origin.") from None


def has_meta_files(source: Source) -> bool:
    """Whether `meta/` lists any file (a dataset root that lost its info.json, not a wrong folder)."""
    try:
        return bool(source.list_files("meta"))
    except DlError:
        return False


def read_info(source: Source) -> dict:
    """`meta/info.json`, checked: a v3.0 dataset with a positive fps, a valid feature table and the path templates.

    Raises:
        DatasetFormatError: naming what is wrong or missing and how to fix it.
    """
    try:
        info = read_json(source, "meta/info.json")
    except SourceFileNotFoundError:
        if has_meta_files(source):
            raise DatasetFormatError(
                f"{source.url} has no meta/info.json, though its meta/ holds other files: restore meta/info.json from "
                "the dataset's origin (a partial download or copy lost it), or, for a `dl transcode` destination, run "
                "the same dl transcode again to finish it."
            ) from None
        raise DatasetFormatError(
            f"{source.url} has no meta/info.json: give the root of a LeRobot v3.0 dataset (the folder holding "
            "meta/, data/ and videos/)."
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
    fps = info["fps"]
    if isinstance(fps, bool) or not isinstance(fps, int | float) or not math.isfinite(fps) or fps <= 0:
        raise DatasetFormatError(f"{source.url}/meta/info.json: fps is {fps!r}; it must be a positive number of "
                                 "frames per second (the rate the dataset was recorded at, e.g. 30).")
    check_features(source.url, info["features"])
    if any(f.get("dtype") == "video" for f in info["features"].values()) and not info.get("video_path"):
        raise DatasetFormatError(f"{source.url}/meta/info.json has video features but no 'video_path'.")
    return info


def read_parquet(source: Source, rel: str, skip_prefix: str | None = None):
    """The whole table of a small metadata parquet file (one read), leaving out columns named `skip_prefix*`."""
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


def read_tasks(source: Source, files: dict[str, int], rel: str = "meta/tasks.parquet") -> dict[int, str]:
    """Task (or subtask) strings by index from `rel`: LeRobot writes the string as the pandas index
    (`__index_level_0__`) beside a `task_index` (`subtask_index`) column; a `task` (`subtask`) column is accepted
    too."""
    if rel not in files:
        raise DatasetFormatError(f"{source.url} has no {rel}.")
    table = read_parquet(source, rel)
    name = posixpath.basename(rel).removesuffix("s.parquet")
    text_col = next((c for c in (name, "__index_level_0__") if c in table.column_names), None)
    if text_col is None or f"{name}_index" not in table.column_names:
        raise DatasetFormatError(
            f"{source.url}/{rel} needs a {name}_index column and the {name} string as a '{name}' "
            f"column or pandas index; it has {table.column_names}."
        )
    return dict(zip(table.column(f"{name}_index").to_pylist(), table.column(text_col).to_pylist(), strict=True))


def read_episodes(source: Source, info: dict, files: dict[str, int]) -> EpisodeColumns:
    """Every `meta/episodes/**/*.parquet` file of the listing `files` as columns (their `stats/` columns left out)."""
    parts = [f for f in files if f.startswith("meta/episodes/") and f.endswith(".parquet")]
    if not parts:
        raise DatasetFormatError(f"{source.url} has no meta/episodes/**/*.parquet files.")
    tables = [(rel, read_parquet(source, rel, skip_prefix="stats/")) for rel in parts]
    return EpisodeColumns.from_tables(source.url, info, tables)
