"""Shared helpers of the mixture tests (test_mixture*.py): generated datasets whose keys are named as other robots
name them, and readers of a mixture's batches."""

import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

import dl

A = dict(episodes=5, frames_per_episode=(10, 20), cameras=1, codec="h264", gop=4, episodes_per_file=2)
"""Member a: 5 episodes at 30 fps, one 128x96 camera `observation.images.cam0`."""
B = dict(episodes=3, frames_per_episode=(12, 24), cameras=2, codec="h264", gop=4, episodes_per_file=2, fps=15, seed=1)
"""Member b: 3 episodes at 15 fps, two cameras, renamed (`B_NAMES`) as another lab's robot names them."""
B_NAMES = {"observation.images.cam0": "observation.images.top", "observation.images.cam1": "observation.images.wrist",
           "observation.state": "observation.joints"}
C = dict(episodes=4, frames_per_episode=(8, 16), cameras=1, codec="h264", gop=4, episodes_per_file=4, fps=10, seed=2,
         width=160, height=128)
"""Member c: 4 episodes at 10 fps, one 160x128 camera (another size than a's and b's)."""
TABULAR = dict(episodes=7, frames_per_episode=(5, 15), cameras=0, episodes_per_file=3, row_group_size=8)
"""No video: 7 uneven episodes (order and resume tests run fast)."""
TABULAR_SMALL = dict(episodes=3, frames_per_episode=(4, 9), cameras=0, episodes_per_file=2, seed=3)
"""No video: 3 short episodes (a member that is oversampled)."""
TO_A = {value: key for key, value in B_NAMES.items() if key != "observation.images.cam1"}
"""b's keys renamed back to a's names (its wrist camera has no counterpart in a)."""


def renamed_dataset(src: Path, dst: Path, names: dict[str, str]) -> Path:
    """A copy of the dataset at `src` whose features are renamed (`{old: new}`) everywhere the format names them:
    info.json, stats.json, the data parquet columns, the camera folders and meta/episodes' video columns."""
    shutil.copytree(src, dst)
    info = json.loads((dst / "meta/info.json").read_text())
    info["features"] = {names.get(k, k): v for k, v in info["features"].items()}
    (dst / "meta/info.json").write_text(json.dumps(info, indent=4))
    stats = json.loads((dst / "meta/stats.json").read_text())
    (dst / "meta/stats.json").write_text(json.dumps({names.get(k, k): v for k, v in stats.items()}))
    for path in (dst / "data").rglob("*.parquet"):
        table = pq.read_table(path)
        pq.write_table(table.rename_columns([names.get(c, c) for c in table.column_names]).replace_schema_metadata(),
                       path)
    for old, new in names.items():
        if (dst / "videos" / old).is_dir():
            (dst / "videos" / old).rename(dst / "videos" / new)
    for path in (dst / "meta/episodes").rglob("*.parquet"):
        table = pq.read_table(path)
        columns = []
        for column in table.column_names:
            for old, new in names.items():
                column = column.replace(f"videos/{old}/", f"videos/{new}/")
            columns.append(column)
        pq.write_table(table.rename_columns(columns).replace_schema_metadata(), path)
    return dst


def members_of(batches) -> list[tuple[int, int]]:
    """(dataset_index, index) of every sample of `batches`, in order."""
    return [(int(d), int(i)) for batch in batches for d, i in zip(batch["dataset_index"], batch["index"], strict=True)]


def per_member(pairs) -> dict[int, Counter]:
    """How often each member's `index` values came, by member."""
    out: dict[int, Counter] = {}
    for member, index in pairs:
        out.setdefault(member, Counter())[index] += 1
    return out


def every_index(loader) -> list[int]:
    """The global `index` of every frame of a loader's selected episodes."""
    return [i for ep in loader.episodes for i in range(ep.dataset_from_index, ep.dataset_to_index)]


def mixture(roots, loader="map", weights="frames", options=None, **kwargs):
    """A mixture of the datasets at `roots`, each through `loader` (uint8 frames unless told)."""
    config = {"image_dtype": kwargs.pop("image_dtype", "uint8")}
    members = [dl.make_dataset(str(root), loader=loader, loader_options=options, **config) for root in roots]
    return dl.make_mixture(members, weights, **kwargs)
