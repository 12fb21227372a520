"""The example third-party plugin `examples/dl-example-zip` (a `zip` source): installed beside dl, listed
by `dl plugins`, run by `dl run`, decoding through the archive, safe in forked workers, clear errors."""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import torch
import torch.utils.data
from plugin_helpers import BUILTINS, CAMERA, EXAMPLE, run_dl

from dl.contracts.config import LoaderConfig
from dl.contracts.errors import DlError
from dl.format.metadata import DatasetMeta
from dl.host.manager import load_plugins
from dl.testing.synthetic import SyntheticConfig, read_frame_code, write_synthetic_dataset

# --- the example plugin: examples/dl-example-zip -------------------------------------------------------

@pytest.fixture(scope="module")
def example_site(tmp_path_factory) -> Path:
    """examples/dl-example-zip pip-installed into a fresh folder (built from a copy: pip builds in tree)."""
    tmp = tmp_path_factory.mktemp("example")
    src = shutil.copytree(EXAMPLE, tmp / "src", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(tmp / "site"), str(src)], check=True, capture_output=True, timeout=300)
    return tmp / "site"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return write_synthetic_dataset(tmp_path_factory.mktemp("ds") / "ds", SyntheticConfig(
        episodes=4, frames_per_episode=(20, 30), cameras=1, episodes_per_file=2, codec="h264"))


def zip_folder(folder: Path, archive: Path, prefix: str = "", compression=zipfile.ZIP_DEFLATED) -> Path:
    """Zip every file under `folder` as `prefix/relative/path`."""
    with zipfile.ZipFile(archive, "w", compression) as zf:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                zf.write(f, f"{prefix}/{f.relative_to(folder)}" if prefix else str(f.relative_to(folder)))
    return archive


@pytest.fixture
def with_example(example_site, monkeypatch, tmp_path):
    """The registry of the built-ins plus the installed example, loaded in this process."""
    monkeypatch.syspath_prepend(str(example_site))
    monkeypatch.setenv("DL_CACHE_DIR", str(tmp_path / "cache"))
    registry = load_plugins(eps=list(entry_points(group="dl")), strict=True).registry  # now finds the example
    assert registry.get("source", "zip").distribution == "dl-example-zip"
    return registry


@pytest.mark.slow
def test_example_is_listed_by_dl_plugins(example_site):
    proc = run_dl("plugins", "--json", env={"PYTHONPATH": str(example_site)})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (zip_entry,) = [p for p in out["plugins"] if p["name"] == "zip"]
    assert zip_entry == {"kind": "source", "name": "zip", "distribution": "dl-example-zip", "version": "0.1.0",
                         "module": "dl_example_zip", "description": zip_entry["description"],
                         "options": [{"name": "inner", "default": None, "required": False, "type": "str | None",
                                      "help": zip_entry["options"][0]["help"]}], "accepts_any_option": False}
    assert "holds meta/info.json" in zip_entry["options"][0]["help"]
    assert "zip" in zip_entry["description"] and out["errors"] == []
    assert {(p["kind"], p["name"]) for p in out["plugins"]} == {*BUILTINS, ("source", "zip")}


@pytest.mark.slow
def test_example_runs_the_benchmark(example_site, dataset, tmp_path):
    archive = zip_folder(dataset, tmp_path / "ds.zip", prefix="ds")
    out_dir = tmp_path / "out"
    proc = run_dl("run", "--source", "zip", "--root", str(archive), "--duration", "1", "--num-workers", "0",
                  "--warmup-batches", "1", "--single-proc-samples", "4", "--out-dir", str(out_dir),
                  env={"PYTHONPATH": str(example_site), "DL_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (result_file,) = out_dir.glob("*.json")
    result = json.loads(result_file.read_text())
    assert result["status"] == "ok"
    assert result["samples_per_s"] > 0 and result["window_samples"] > 0
    assert result["config"]["source"] == "zip"
    assert result["dataset"]["root"] == f"zip://{archive}!/ds"
    assert (result["dataset"]["episodes"], result["dataset"]["cameras"]) == (4, [CAMERA])


@pytest.mark.parametrize("prefix", ["", "ds", "nested/deeper"])
def test_example_finds_the_dataset_root_and_decodes_through_the_zip(with_example, dataset, tmp_path, prefix):
    archive = zip_folder(dataset, tmp_path / "ds.zip", prefix=prefix)
    source = with_example.create("source", "zip", str(archive))
    assert type(source).__name__ == "ZipSource"
    assert (source.root, source.name, source.url) == (prefix, "zip", f"zip://{archive}!" + f"/{prefix}" * bool(prefix))
    meta = DatasetMeta.load(source)
    assert len(meta.episodes) == 4 and meta.video_keys == [CAMERA]
    decoder = with_example.create("decoder", "cpu")
    zipped = with_example.create("loader", "map", meta, decoder, LoaderConfig(image_dtype="uint8"))
    local_meta = DatasetMeta.load(with_example.create("source", "local", str(dataset)))
    local = with_example.create("loader", "map", local_meta, decoder, LoaderConfig(image_dtype="uint8"))
    assert len(zipped) == len(local) == meta.total_frames
    for i in (0, 7, len(zipped) - 1, 3):  # a backward seek at the end
        sample = zipped[i]
        assert read_frame_code(sample[CAMERA]) == (int(sample["index"]), 0)
        assert torch.equal(sample[CAMERA], local[i][CAMERA])
        assert torch.equal(sample["action"], local[i]["action"])


def test_example_is_safe_in_forked_dataloader_workers(with_example, dataset, tmp_path):
    # Forked workers inherit the parent's open archive (and its file offset); the source must reopen it.
    archive = zip_folder(dataset, tmp_path / "ds.zip")
    meta = DatasetMeta.load(with_example.create("source", "zip", str(archive)))
    ds = with_example.create("loader", "map", meta, with_example.create("decoder", "cpu"),
                             LoaderConfig(image_dtype="uint8"))
    assert read_frame_code(ds[0][CAMERA]) == (0, 0)  # the parent reads before the fork, as the benchmark does
    seen = []
    loader = torch.utils.data.DataLoader(ds, batch_size=4, shuffle=True, num_workers=2,
                                         multiprocessing_context="fork")
    for _ in range(2):
        for batch in loader:
            for frame, index in zip(batch[CAMERA], batch["index"].tolist(), strict=True):
                assert read_frame_code(frame) == (index, 0)
                seen.append(index)
    assert sorted(seen) == sorted(list(range(len(ds))) * 2)


@pytest.mark.slow
def test_example_passes_the_source_suite_in_its_own_tests(example_site, tmp_path):
    """The example package's own tests (examples/dl-example-zip/tests) run dl.testing's source suite against
    the installed plugin, as a plugin author's CI would."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                           str(EXAMPLE / "tests")], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(example_site), "DL_CACHE_DIR": str(tmp_path / "c")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout


def test_example_errors_name_the_archive_and_the_fix(with_example, dataset, tmp_path):
    def factory(*args, **kwargs):
        return with_example.create("source", "zip", *args, **kwargs)

    with pytest.raises(DlError, match=r"--root .*nope\.zip: no such file\. Give a \.zip of a LeRobot v3\.0"):
        factory(str(tmp_path / "nope.zip"))
    (tmp_path / "fake.zip").write_text("not a zip")
    with pytest.raises(DlError, match=r"fake\.zip: not a zip archive"):
        factory(str(tmp_path / "fake.zip"))
    empty = zip_folder(dataset / "data", tmp_path / "data-only.zip")
    with pytest.raises(DlError, match=rf"{re.escape(str(empty))} holds no meta/info.json in any folder"):
        factory(str(empty))
    two = tmp_path / "two.zip"
    with zipfile.ZipFile(two, "w") as zf:
        for prefix in ("a", "b"):
            for f in sorted(dataset.rglob("*")):
                if f.is_file():
                    zf.write(f, f"{prefix}/{f.relative_to(dataset)}")
    with pytest.raises(DlError, match=r"holds 2 datasets \(a, b\); pick one with --source-option inner=DIR"):
        factory(str(two))
    assert factory(str(two), inner="b/").root == "b"
    with pytest.raises(DlError, match=r"holds no c/meta/info.json"):
        factory(str(two), inner="c")
