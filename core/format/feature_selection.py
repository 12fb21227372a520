"""Choosing what to load (`features=[...]`, `dl run --features`): a view of a dataset's metadata with only the
selected features, so that loaders never open an unselected camera's files nor read an unselected column, and remote
sources never fetch them (lerobot #3213: a policy that uses one of three cameras should not decode three)."""

import fnmatch

from ..contracts.errors import DlError
from .features import camera_keys
from .metadata import DEFAULT_KEYS, DatasetMeta


def with_features(meta: DatasetMeta, patterns: list[str], delta_timestamps: dict | None = None) -> DatasetMeta:
    """`meta` with only the features `patterns` select (exact keys or shell-style globs such as
    `observation.images.*`; `DEFAULT_KEYS` are always kept, and `task` is served from `task_index`): a
    `DatasetMeta` whose features, cameras and episodes' camera spans (`EpisodeColumns.with_cameras`) are the selected
    ones, sharing `meta`'s episode arrays and `load_times`.

    Raises:
        DlError: a pattern that selects no feature, or `delta_timestamps` naming a key not selected (one line
            naming both and what to do).
    """
    keys = list(meta.features)
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(k, p) for k in keys)]
    if unmatched:
        raise DlError(f"features {unmatched} select no feature of {meta.source.url}; its features: "
                      f"{', '.join(keys)}.")
    chosen = [k for k in keys if k in DEFAULT_KEYS or any(fnmatch.fnmatchcase(k, p) for p in patterns)]
    outside = sorted(set(delta_timestamps or {}) - set(chosen))
    if outside:
        raise DlError(f"delta_timestamps names {', '.join(outside)}, which features={list(patterns)} does not "
                      "select: add it to features, or leave its window out.")
    info = {**meta.info, "features": {k: meta.features[k] for k in chosen}}
    columns = meta.columns.with_cameras(camera_keys(info["features"], "video"))
    selected = DatasetMeta(meta.source, info, columns, meta.tasks, meta.stats_document, meta.files, meta.subtasks)
    selected.load_times = meta.load_times  # its checks and index reads are the opening's
    return selected
