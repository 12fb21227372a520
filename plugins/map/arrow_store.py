"""A memory-mapped Arrow IPC file holding the selected episodes' tabular rows, one record batch per
episode, each column dense in its info.json dtype (image features as their encoded bytes). Built once per (dataset
files, episodes, keys) into dl's cache folder; every DataLoader worker maps the same pages, so tabular data costs
no RSS per worker."""

import hashlib
import json
import os
from itertools import groupby

import numpy as np
import pyarrow as pa

from dl.format.columns import ImageColumn
from dl.format.metadata import DatasetMeta, EpisodeMeta
from dl.format.tabular import EpisodeArrays, episode_arrays, read_episode_tables, table_to_arrays
from dl.kits.paths import cache_dir

FORMAT_VERSION = 3  # 3: rows found by global index range; image features as binary columns


class ArrowEpisodeStore:
    """Per-episode column arrays backed by a memory map.

    Use `ArrowEpisodeStore.build(meta, episodes, keys)`. `arrays(i)` gives the i-th episode's
    `{key: array [length, *shape]}` as read-only views of the map. Pickles as its path (workers remap).
    """

    def __init__(self, path: str):
        self.path = path
        self._batches: list[EpisodeArrays] | None = None

    @classmethod
    def build(cls, meta: DatasetMeta, episodes: list[EpisodeMeta], keys: list[str]) -> "ArrowEpisodeStore":
        """Write the cache file unless an identical one exists; the key covers every data file's fingerprint,
        each episode's index, length, first global index and file, and the keys, so an edited dataset (data
        or meta/episodes) is rebuilt and re-verified."""
        files = sorted({ep.data_path for ep in episodes})
        ident = json.dumps([FORMAT_VERSION, meta.source.url, meta.fps, [(f, meta.source.fingerprint(f)) for f in files],
                            [(ep.index, ep.length, ep.dataset_from_index, ep.data_path) for ep in episodes], keys])
        path = cache_dir("tabular") / f"{hashlib.sha256(ident.encode()).hexdigest()[:32]}.arrow"
        if not path.exists():
            _write(meta, episodes, keys, str(path))
        return cls(str(path))

    def __getstate__(self):
        return {"path": self.path, "_batches": None}

    def arrays(self, i: int) -> EpisodeArrays:
        """Columns of the i-th stored episode (in the order given to `build`)."""
        if self._batches is None:
            reader = pa.ipc.open_file(pa.memory_map(self.path, "r"))
            self._batches = [table_to_arrays(reader.get_batch(b)) for b in range(reader.num_record_batches)]
        return self._batches[i]


def _write(meta: DatasetMeta, episodes: list[EpisodeMeta], keys: list[str], path: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    order = {ep.index: i for i, ep in enumerate(episodes)}
    batches: dict[int, pa.RecordBatch] = {}
    writer = None
    next_i = 0
    try:
        for data_path, group in groupby(sorted(episodes, key=lambda e: e.data_path), key=lambda e: e.data_path):
            for ep_index, table in read_episode_tables(meta, list(group), keys).items():
                where = f"{meta.source.url}/{data_path} (episode {ep_index})"
                batches[order[ep_index]] = _dense_batch(episode_arrays(table, meta.features, where))
            while next_i in batches:  # write in selection order, holding only out-of-order batches
                batch = batches.pop(next_i)
                writer = writer or pa.ipc.new_file(tmp, batch.schema)
                writer.write_batch(batch)
                next_i += 1
        writer.close()
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _dense_batch(arrays: EpisodeArrays) -> pa.RecordBatch:
    return pa.record_batch({key: _dense_array(values) for key, values in arrays.items()})


def _dense_array(values: np.ndarray | ImageColumn) -> pa.Array:
    if isinstance(values, ImageColumn):
        return values.array
    if values.dtype == object:
        return pa.array(values.tolist())
    arr = pa.array(np.ascontiguousarray(values).reshape(-1))
    for size in reversed(values.shape[1:]):
        arr = pa.FixedSizeListArray.from_arrays(arr, size)
    return arr

