"""info.json's feature table as dl serves it: which dtypes exist, which features are cameras (video streams or
images stored in the data parquet), which are left out and why, and whether a data column's Arrow type can hold a
feature's values.

LeRobot's dtypes: the numeric ones, "bool", "string", "video" (one mp4 stream per camera and file), "image" (PNG
or JPEG bytes in the data parquet, the `datasets.Image` struct `{bytes, path}`), and in datasets written by LeRobot
0.6, "language" (the `language_persistent` / `language_events` annotation columns).
"""

import pyarrow as pa

from ..contracts.errors import DatasetFormatError

NUMERIC_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                  "uint64", "bool")
"""Feature dtypes served as numeric tensors of that dtype."""
KNOWN_DTYPES = (*NUMERIC_DTYPES, "string", "video", "image", "language")
"""Every feature dtype LeRobot writes (0.4.x and 0.6)."""
HIGH_BIT_DEPTH = ("10", "12", "14", "16")
"""Pixel-format fragments (`gray12le`, `yuv420p12le`, `gray16le`...) of streams deeper than 8 bits per channel."""


def check_features(url: str, features) -> None:
    """Refuse a feature table LeRobot's own loader could not read either: not a mapping of mappings, a feature
    without a known `dtype`, or a `shape` that is not a list of positive integers.

    Raises:
        DatasetFormatError: naming the feature and what to fix in meta/info.json.
    """
    where = f"{url}/meta/info.json"
    if not isinstance(features, dict) or not features:
        raise DatasetFormatError(f"{where}: 'features' must map each feature key to its dtype and shape, got "
                                 f"{type(features).__name__}. Restore info.json from the dataset's origin.")
    for key, feature in features.items():
        if not isinstance(feature, dict):
            raise DatasetFormatError(f"{where}: feature {key!r} must be a mapping with 'dtype' and 'shape', got "
                                     f"{type(feature).__name__}.")
        dtype = feature.get("dtype")
        if dtype not in KNOWN_DTYPES:
            raise DatasetFormatError(f"{where}: feature {key!r} has dtype {dtype!r}, which LeRobot does not write "
                                     f"(known: {', '.join(KNOWN_DTYPES)}). Fix the dtype in meta/info.json.")
        shape = feature.get("shape")
        if dtype != "language" and (not isinstance(shape, list | tuple) or not all(
                isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape)):
            raise DatasetFormatError(f"{where}: feature {key!r} has shape {shape!r}; a shape is a list of positive "
                                     "integers, e.g. [6] or [480, 640, 3].")


def video_info(feature: dict) -> dict:
    """A video feature's `info` (`video_info` in older writers): `video.codec`, `video.fps`...; {} when absent."""
    return feature.get("info") or feature.get("video_info") or {}


def is_depth_map(feature: dict) -> bool:
    """Whether a video feature is a depth camera: `is_depth_map` in its `info` (LeRobot 0.6) or
    `video.is_depth_map` (LeRobot 0.4), as LeRobot 0.6.1's `encoder_config_from_video_info` reads them."""
    info = video_info(feature)
    return feature.get("dtype") == "video" and bool(info.get("is_depth_map") or info.get("video.is_depth_map"))


def left_out(features: dict) -> dict[str, str]:
    """The features dl does not serve, `{key: why, in words}`: a "language" feature other than LeRobot 0.6's two
    annotation columns (`language_persistent`, `language_events`, served as lists of messages per frame). Depth
    cameras are served (`dl.format.depth`)."""
    return {key: "a language feature LeRobot 0.6 does not define (its language columns are language_persistent and "
                 "language_events)" for key, feature in features.items()
            if feature.get("dtype") == "language" and key not in ("language_persistent", "language_events")}


def camera_keys(features: dict, dtype: str) -> list[str]:
    """The served features of `dtype` ("video" or "image"), in info.json order."""
    skipped = left_out(features)
    return [k for k, f in features.items() if f.get("dtype") == dtype and k not in skipped]


def arrow_leaf(arrow_type: pa.DataType) -> pa.DataType:
    """The element type of a (nested) list type: `list<list<float>>` -> float."""
    while pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
        arrow_type = arrow_type.value_type
    return arrow_type


def column_type_problem(key: str, feature: dict, arrow_type: pa.DataType) -> str | None:
    """Why a data column of `arrow_type` cannot hold feature `key` as info.json describes it, or None. A numeric
    feature needs numeric (or bool) elements; an image feature the `datasets.Image` struct (`bytes`, `path`) or
    binary; a string feature strings. A numeric type other than the feature's is fine here, and strings for a
    numeric feature too: values are cast safely when read (`dl.format.columns`: text parsed as numbers), and a cast
    that would lose or invent values is refused there."""
    dtype, leaf = feature.get("dtype"), arrow_leaf(arrow_type)
    if dtype in NUMERIC_DTYPES:
        ok = pa.types.is_integer(leaf) or pa.types.is_floating(leaf) or pa.types.is_boolean(leaf) or holds_text(
            arrow_type)
        want = f"numbers ({dtype})"
    elif dtype == "image":
        ok = pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type) or (
            pa.types.is_struct(arrow_type) and arrow_type.get_field_index("bytes") >= 0)
        want = "PNG/JPEG bytes (the datasets.Image struct {bytes, path})"
    elif dtype == "string":
        ok = pa.types.is_string(leaf) or pa.types.is_large_string(leaf)
        want = "strings"
    else:
        return None
    return None if ok else f"column {key!r} holds {arrow_type}, but meta/info.json says it is {want}"


def holds_text(arrow_type: pa.DataType) -> bool:
    """Whether a (list) column's elements are strings (numbers written as text: parsed, as LeRobot's loader casts
    them, with a warning)."""
    leaf = arrow_leaf(arrow_type)
    return pa.types.is_string(leaf) or pa.types.is_large_string(leaf)
