"""One listing per dataset folder per run, whatever the workers and ranks: the metadata keeps its listing,
DataLoader workers inherit it, and `dl run`'s host hands it to every run and rank as a snapshot."""

import shutil
from collections import Counter
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import pytest
from counting_source import listings
from plugin_helpers import fake_distribution, run_dl

import dl
from dl.host.assembly import build_loader, open_dataset
from dl.host.manager import load_plugins

HERE = Path(__file__).parent


def folders(log, root):
    """How many listing requests named each folder of the dataset (relative to its root)."""
    return Counter(path[len(str(root)) + 1:] for _, _, path in listings(log))


@pytest.mark.parametrize("loader", ["map", "pool"])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_one_listing_per_folder_whatever_the_workers(small_dataset, tmp_path, loader, num_workers):
    log = str(tmp_path / "listings.log")
    registry = load_plugins(eps=[*entry_points(group="dl"), EntryPoint("counting", "counting_source", group="dl")],
                            strict=True).registry
    meta = open_dataset(str(small_dataset), "counting", {"log": log}, registry=registry)
    built = build_loader(meta, loader, "cpu", config=dl.LoaderConfig(image_dtype="uint8"), registry=registry)
    for _ in range(2):  # two epochs
        batches = list(dl.make_dataloader(built.loader, batch_size=8, num_workers=num_workers))
    assert sum(len(b["index"]) for b in batches) == meta.total_frames
    assert folders(log, small_dataset) == {"meta": 1, "data": 1, "videos": 1}


@pytest.mark.slow
def test_dl_run_lists_each_folder_once_for_all_runs_and_ranks(small_dataset, tmp_path):
    site = tmp_path / "site"
    fake_distribution(site, "dl-counting", "0.1", {"counting": "counting_source"})
    shutil.copy(HERE / "counting_source.py", site)
    log = tmp_path / "listings.log"
    out = tmp_path / "out"
    proc = run_dl("run", "--source", "counting", "--source-option", f"log={log}", "--root", str(small_dataset),
                  "--loader", "pool", "--loader-option", "episode_pool_size=2", "--world-size", "2",
                  "--num-workers", "0,2", "--duration", "0.5", "--warmup-batches", "1", "--single-proc-samples", "2",
                  "--batch-size", "4", "--out-dir", str(out), env={"PYTHONPATH": str(site)}, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(list(out.glob("*-rank1.json"))) == 2  # two runs of two ranks each did run
    assert folders(log, small_dataset) == {"meta": 1, "data": 1, "videos": 1}
    assert len({pid for pid, _, _ in listings(log)}) == 1, "only the host process lists"
