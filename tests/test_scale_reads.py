"""What opening a dataset of many short episodes reads, at a small size (issue 68): its metadata once per run, in
the process that builds the loader, never again in a DataLoader worker or in a rank built from the snapshot; and a
selection (`LoaderConfig.episodes`) reads only its own episodes' data and video files."""

import importlib.util
import os
import re
from collections import Counter
from pathlib import Path

import pytest
from fsspec.implementations.local import LocalFileSystem

import dl
from dl import Source
from dl.format.metadata import DatasetMeta
from dl.host.assembly import build_loader

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "scale_dataset.py"
_spec = importlib.util.spec_from_file_location("scale_dataset", SCRIPT)
scale_dataset = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scale_dataset)
PER_FILE = 100
"""Episodes per data and video file of the generated dataset (800 episodes: 8 of each; 4 meta/episodes files)."""


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return scale_dataset.write_scale_dataset(tmp_path_factory.mktemp("scale") / "ds", 800, per_file=PER_FILE,
                                             meta_per_file=200)


class OpenLoggingFileSystem(LocalFileSystem):
    """The local filesystem, each file opened logged as "PID PATH" into `log` (from whichever process opens it)."""

    cachable = False

    def __init__(self, log: str, **kwargs):
        super().__init__(**kwargs)
        self.log = log

    def _open(self, path, *args, **kwargs):
        with open(self.log, "a") as f:
            f.write(f"{os.getpid()} {self._strip_protocol(path)}\n")
        return super()._open(path, *args, **kwargs)


def opened(log: Path, root: Path) -> Counter:
    """(pid, path relative to `root`) -> times opened."""
    if not log.exists():
        return Counter()
    pairs = (line.split(" ", 1) for line in log.read_text().splitlines())
    return Counter((int(pid), path[len(str(root)) + 1:]) for pid, path in pairs)


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_metadata_is_read_once_per_run_not_per_worker_or_rank(root, tmp_path, loader):
    log = tmp_path / "opens.log"
    meta = DatasetMeta.load(Source(OpenLoggingFileSystem(str(log)), str(root), "opens"))
    read = {path for _, path in opened(log, root) if path.startswith("meta/")}
    assert read == {"meta/info.json", "meta/tasks.parquet", "meta/stats.json",
                    *(f"meta/episodes/chunk-000/file-{i:03d}.parquet" for i in range(4))}
    assert all(n == 1 for (_, path), n in opened(log, root).items() if path.startswith("meta/"))
    snapshot = meta.write_snapshot(tmp_path / "snapshot")
    config = dl.LoaderConfig(image_dtype="uint8", episodes=list(range(0, 800, 37)), rank=0, world_size=1)
    built = build_loader(meta, loader, "cpu", config=config)
    batches = list(dl.make_dataloader(built.loader, batch_size=16, num_workers=2))
    assert sum(len(b["index"]) for b in batches) == sum(ep.length for ep in built.loader.episodes)
    for rank in range(2):  # each rank from the snapshot, as `dl run`'s ranks are built
        ranked = DatasetMeta.from_snapshot(Source(OpenLoggingFileSystem(str(log)), str(root), "opens"), snapshot)
        config = dl.LoaderConfig(image_dtype="uint8", episodes=list(range(0, 800, 37)), rank=rank, world_size=2)
        next(iter(dl.make_dataloader(build_loader(ranked, loader, "cpu", config=config).loader, batch_size=4,
                                     num_workers=2)))
    opens = opened(log, root)
    assert {pid for (pid, path) in opens if path.startswith("meta/")} == {os.getpid()}
    assert sum(n for (_, path), n in opens.items() if path.startswith("meta/")) == len(read)
    if loader == "pool":  # its workers read the rows through the source: its log reaches them
        assert len({pid for pid, _ in opens}) > 1, "no worker opened a file through the source"


def _touched(proxy, prefix: str) -> set[str]:
    """The data and video files the proxy saw a request for, relative to the dataset's `prefix`."""
    paths = (re.match(r"\w+ /[^/]+/([^? ]+)", line) for line in proxy.request_lines)
    return {m.group(1)[len(prefix) + 1:] for m in paths if m and m.group(1).startswith(f"{prefix}/")
            and not m.group(1).startswith(f"{prefix}/meta/")}


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_a_selection_reads_only_its_own_files(root, tmp_path, loader):
    from dl.testing.fault_proxy import FaultProxy
    from dl.testing.s3_server import S3Server

    mine = [310, 311, 350, 399]  # all in data and video file 3 (episodes 300-399)
    with S3Server() as s3:
        url = s3.upload(root, "scale", f"sel-{loader}")
        with FaultProxy(s3.endpoint_url) as proxy:
            options = {"storage_options": s3.storage_options(proxy.endpoint_url), "cache_dir": str(tmp_path / "c")}
            dataset = dl.make_dataset(url, source="bucket", source_options=options, loader=loader, episodes=mine,
                                      image_dtype="uint8")
            batches = list(dl.make_dataloader(dataset, batch_size=8, num_workers=2))
            touched = _touched(proxy, f"sel-{loader}")
    assert sorted({int(e) for b in batches for e in b["episode_index"]}) == mine
    assert touched == {"data/chunk-000/file-003.parquet",
                       "videos/observation.images.cam0/chunk-000/file-003.mp4"}, touched
