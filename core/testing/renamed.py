"""A copy of a LeRobot v3.0 dataset whose features are renamed, as another lab's robot names them
(`observation.images.top` for `observation.images.cam0`): for tests and benchmarks of mixtures (`dl.mixture`), whose
members name things differently."""

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq


def renamed_dataset(src: Path, dst: Path, names: dict[str, str]) -> Path:
    """Copy the dataset at `src` to `dst` (which must not exist) with its features renamed (`{old: new}`) everywhere
    the format names them: `meta/info.json`, `meta/stats.json`, the data parquet columns, the camera folders under
    `videos/` and the `videos/<key>/...` columns of `meta/episodes`. Returns `dst`.

    Raises:
        FileExistsError: `dst` exists.
    """
    src, dst = Path(src), Path(dst)
    shutil.copytree(src, dst)
    info = json.loads((dst / "meta/info.json").read_text())
    info["features"] = {names.get(k, k): v for k, v in info["features"].items()}
    (dst / "meta/info.json").write_text(json.dumps(info, indent=4))
    if (dst / "meta/stats.json").is_file():
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
