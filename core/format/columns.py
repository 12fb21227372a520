"""Arrow columns of an episode's rows as what a sample is built from: numeric and string columns as numpy arrays
`[rows, *shape]`, image columns (PNG/JPEG bytes in the data parquet) as `ImageColumn`s that keep the bytes in Arrow
memory (a memory map stays a memory map), LeRobot 0.6's language columns as `LanguageColumn`s, and numeric values
cast to their info.json dtype only where no value changes (LeRobot's `datasets` loader casts with Arrow's safe cast
and fails on one that would)."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..contracts.errors import DatasetFormatError, warn
from .features import NUMERIC_DTYPES, arrow_leaf, column_type_problem, holds_text


class ArrowColumn:
    """A column kept as an Arrow array (zero-copy from a memory-mapped store or a read batch), converted row by row
    when a sample asks: `column[row]` one row's value, `column[rows]` (an int array) a list of them; `nbytes` counts
    the Arrow bytes."""

    __slots__ = ("array",)

    def __init__(self, array: pa.Array):
        self.array = array

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, rows):
        if isinstance(rows, int | np.integer):
            return self._value(int(rows))
        return [self._value(int(r)) for r in np.asarray(rows).reshape(-1)]

    def _value(self, row: int):
        return self.array[row].as_py()

    @property
    def nbytes(self) -> int:
        return self.array.nbytes

    def copy(self) -> "ArrowColumn":
        """A copy in buffers of its own (a slice would keep the whole batch it was read in alive)."""
        return type(self)(pa.concat_arrays([self.array.slice(0, 0), self.array]) if len(self.array) else self.array)


class ImageColumn(ArrowColumn):
    """An image feature's column: one PNG or JPEG file's bytes per row, in an Arrow binary array."""


LANGUAGE_FIELDS = {"language_persistent": ("role", "content", "style", "timestamp", "camera", "tool_calls"),
                   "language_events": ("role", "content", "style", "camera", "tool_calls")}
"""LeRobot 0.6's language columns and the fields of their messages (`lerobot.datasets.language`)."""


def _language_type(name: str) -> pa.DataType:
    kinds = {"timestamp": pa.float32(), "tool_calls": pa.list_(pa.string())}
    return pa.list_(pa.struct([(f, kinds.get(f, pa.string())) for f in LANGUAGE_FIELDS[name]]))


class LanguageColumn(ArrowColumn):
    """A LeRobot 0.6 language column (`language_persistent` / `language_events`): per row a list of messages, each a
    dict of `LANGUAGE_FIELDS`, served as LeRobot 0.6.1's `datasets` features give them: `timestamp` a float32 value,
    `tool_calls` None or a list of JSON values (its `datasets.Json`: decoded from JSON text). Kept in one Arrow type
    per column (`of`), `tool_calls` as JSON text, whatever types the annotation writer's inference gave the file
    (it infers them from the values: `list<null>` for a column of empty lists)."""

    @classmethod
    def of(cls, column: pa.Array | pa.ChunkedArray, name: str) -> "LanguageColumn":
        """The column `name` (a key of `LANGUAGE_FIELDS`) in its canonical Arrow type."""
        arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        want = _language_type(name)
        if arr.type == want:
            return cls(arr)
        fields = LANGUAGE_FIELDS[name]
        rows = [None if messages is None else [{f: _language_field(m, f) for f in fields} for m in messages]
                for messages in arr.to_pylist()]
        return cls(pa.array(rows, want))

    def _value(self, row: int):
        messages = self.array[row].as_py()
        for message in messages or ():
            calls = message.get("tool_calls")
            if calls is not None:
                message["tool_calls"] = [json.loads(c) for c in calls]
        return messages


def _language_field(message: dict, field: str):
    value = message.get(field)
    if field == "tool_calls" and value is not None:
        return [v if isinstance(v, str) else json.dumps(v) for v in value]
    return value


EpisodeArrays = dict[str, "np.ndarray | ArrowColumn"]
"""One episode's columns: `{key: array [length, *shape]}` in the feature's dtype, or an `ArrowColumn` (images,
language)."""


def image_bytes(column: pa.Array | pa.ChunkedArray, name: str) -> pa.Array:
    """The encoded images of an image column: the `bytes` field of LeRobot's `datasets.Image` struct, or the column
    itself when it is plain binary.

    Raises:
        DatasetFormatError: a row has no bytes (LeRobot v3.0 embeds every image in the data file).
    """
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_struct(arr.type):
        arr = arr.field("bytes")
    if arr.null_count:
        raise DatasetFormatError(f"image column {name!r} has {arr.null_count} row(s) without image bytes (a path "
                                 "only?); LeRobot v3.0 embeds each image's PNG/JPEG bytes in the data file.")
    return arr


def is_image_type(arrow_type: pa.DataType) -> bool:
    """Whether a column of this type holds encoded images (a `{bytes, path}` struct or binary)."""
    return pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type) or (
        pa.types.is_struct(arrow_type) and arrow_type.get_field_index("bytes") >= 0)


def table_to_arrays(table: pa.Table | pa.RecordBatch) -> EpisodeArrays:
    """Columns as numpy arrays `[rows, *shape]`, zero-copy where Arrow allows (numeric, no nulls); image columns as
    `ImageColumn`s, LeRobot 0.6's language columns as `LanguageColumn`s.

    List columns (`list<float32>`, nested lists) become one dense array; string columns become object arrays.

    Raises:
        DatasetFormatError: a list column's rows have unequal lengths.
    """
    out: EpisodeArrays = {}
    for name in table.column_names:
        column = table.column(name)
        if name in LANGUAGE_FIELDS:
            out[name] = LanguageColumn.of(column, name)
        elif is_image_type(column.type):
            out[name] = ImageColumn(image_bytes(column, name))
        else:
            out[name] = _column_to_numpy(column, name)
    return out


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


DROPPED_BY_ANNOTATION = ("subtask_index",)
"""Columns info.json may list that a data file lacks: LeRobot 0.6.1's `lerobot-annotate` drops LeRobot 0.4's
`subtask_index` from the parquet and leaves it in info.json; LeRobot serves it as None."""
_WARNED: set[str] = set()


def check_schema(where: str, schema: pa.Schema, features: dict, keys: list[str]) -> None:
    """Refuse a data file whose columns cannot hold `keys` as info.json describes them: a missing column (but
    `DROPPED_BY_ANNOTATION`'s, warned about), or one of another kind (`dl.format.features.column_type_problem`:
    images for a float vector...); warn where numbers are written as text (parsed when read).

    Raises:
        DatasetFormatError: naming the file and the columns.
    """
    missing = [k for k in keys if k not in schema.names and k not in DROPPED_BY_ANNOTATION]
    if missing:
        raise DatasetFormatError(f"{where} lacks column(s) {', '.join(missing)} listed in info.json.")
    for key in DROPPED_BY_ANNOTATION:
        if key in keys and key not in schema.names and key not in _WARNED:
            _WARNED.add(key)  # once per process: every data file of an annotated dataset lacks it
            warn(f"{where} has no {key} column, which meta/info.json lists (LeRobot 0.6.1's annotation tool drops "
                 f"it); {key} is served as None, as LeRobot serves it, and no subtask string.")
    for key in (k for k in keys if k in schema.names):
        feature = features.get(key, {})
        problem = column_type_problem(key, feature, schema.field(key).type)
        if problem:
            raise DatasetFormatError(f"{where}: {problem}; every sample would carry wrong values. Fix the feature in "
                                     "meta/info.json or the data file.")
        if feature.get("dtype") in NUMERIC_DTYPES and holds_text(schema.field(key).type):
            warn(f"{where}: column {key!r} holds numbers written as text ({schema.field(key).type}), meta/info.json "
                 f"says {feature['dtype']}; dl parses them, as LeRobot's loader does (text that is not a number is "
                 "refused).")


def episode_arrays(table: pa.Table, features: dict, where: str = "") -> EpisodeArrays:
    """`table_to_arrays` with numeric columns cast to their info.json dtype (what LeRobot returns) where the cast
    keeps every value, and each column's shape checked against info.json's.

    Raises:
        DatasetFormatError: a cast that would change values (float to int8, out of range), or a column whose
            rows are not info.json's shape (`[1]` is a scalar per row); `where` names the file and episode.
    """
    for name in table.column_names:
        dtype = features.get(name, {}).get("dtype")
        column = table.column(name)
        if dtype in NUMERIC_DTYPES and not is_image_type(column.type):
            table = table.set_column(table.column_names.index(name), name, _safe_cast(column, dtype, name, where))
    arrays = table_to_arrays(table)
    for name, values in arrays.items():
        feature = features.get(name, {})
        if feature.get("dtype") in NUMERIC_DTYPES or feature.get("dtype") == "string":
            want = tuple(feature.get("shape") or ())
            got = values.shape[1:]
            if got != want and not (want == (1,) and got == ()):
                raise DatasetFormatError(f"{where}: column {name!r} holds rows of shape {list(got) or [1]}, but "
                                         f"meta/info.json says {list(want)}. Fix the shape in meta/info.json.")
    return arrays


def _safe_cast(column: pa.ChunkedArray, dtype: str, name: str, where: str) -> pa.ChunkedArray:
    target = pa.from_numpy_dtype(np.dtype(dtype))
    leaf_type = arrow_leaf(column.type)
    if leaf_type == target:
        return column
    try:
        return pc.cast(column, _renest(column.type, target), safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise DatasetFormatError(f"{where}: column {name!r} holds {leaf_type} values that {dtype} (its dtype in "
                                 f"meta/info.json) cannot hold: {exc}. Fix the dtype in meta/info.json.") from None


def _renest(arrow_type: pa.DataType, leaf: pa.DataType) -> pa.DataType:
    """`arrow_type` with its innermost element type replaced by `leaf` (list nesting kept)."""
    if pa.types.is_fixed_size_list(arrow_type):
        return pa.list_(_renest(arrow_type.value_type, leaf), arrow_type.list_size)
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return pa.list_(_renest(arrow_type.value_type, leaf))
    return leaf
