"""Small synthetic but format-true LeRobot v3.0 datasets with real FFmpeg-encoded video.

The layout matches LeRobot 0.4.x: ``data/chunk-CCC/file-FFF.parquet``, one mp4 per camera and file under
``videos/<key>/``, ``meta/episodes/chunk-000/file-000.parquet``, ``meta/tasks.parquet``, ``meta/info.json``
and ``meta/stats.json``. Every value is a pure function of its global frame ``index`` so readers can be
verified exactly: ``state_value``/``action_value`` give the vector columns and ``frame_code`` draws each
camera frame as a grid of black/white cells that ``read_frame_code`` decodes back to ``(index, camera)``;
``texture`` gives those frames a camera's bitrate (see ``frame_code``).

Options write what LeRobot's own tools write for real datasets (see ``SyntheticConfig``): cameras stored as PNG or
JPEG images in the data parquet (``use_videos=False``), recorded wall-clock timestamps, the v2.1 -> v3.0
converter's mislabelled data files, stale info.json totals (a partial upload), a LeRobot 0.6 depth camera and
language columns, LeRobot 0.4 subtasks. The files themselves are written by ``dl.testing.synthetic_writer``.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from collections.abc import Callable

from .synthetic_spec import (  # noqa: F401 - the public names of dl.testing.synthetic
    _CODEC_ARGS,
    CODECS,
    IMAGE_FORMATS,
    INDEX_BITS,
    MAX_TEXTURE,
    SyntheticConfig,
    action_value,
    camera_key,
    codec_args,
    depth_code,
    frame_code,
    language_messages,
    read_frame_code,
    served_index,
    state_value,
    task_string,
    timestamps,
)
from .synthetic_writer import write_dataset


def write_synthetic_dataset(root: str | os.PathLike, config: SyntheticConfig | None = None, *,
                            progress: Callable[[int, int], None] | None = None) -> pathlib.Path:
    """Generate the dataset described by ``config`` (default: ``SyntheticConfig()``) at ``root``; return ``root`` as
    a ``Path``.

    Everything is written into a hidden sibling temp folder that is renamed onto ``root`` at the end, so
    a crash never leaves a partial dataset. ``progress(done_episodes, total_episodes)`` is called for each
    episode once its file is written. Raises ``FileExistsError`` naming ``root`` if it exists and is not an
    empty folder (also when another writer fills it first), ``RuntimeError`` if ffmpeg is missing or fails.
    """
    config = config or SyntheticConfig()
    root = pathlib.Path(root)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise FileExistsError(f"dataset root {root} already exists and is not an empty directory")
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None and (config.video_keys or config.depth_camera):
        raise RuntimeError("ffmpeg not found on PATH; install it, e.g. `apt-get install -y ffmpeg`")
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{root.name}.tmp-", dir=root.parent))
    try:
        write_dataset(tmp, config, ffmpeg, progress)
        tmp.chmod(0o755)
        try:
            os.rename(tmp, root)  # atomic; replaces only a missing or empty directory
        except OSError as exc:
            if root.is_dir() and any(root.iterdir()):
                raise FileExistsError(f"dataset root {root} was filled by another writer") from exc
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return root
