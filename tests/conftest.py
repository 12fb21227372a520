"""Shared fixtures: generated LeRobot v3.0 datasets (real FFmpeg video), made once per test session, and
an isolated dl cache folder per test."""

import os
import shutil
from pathlib import Path

import hypothesis_profiles  # noqa: F401 - loads the hypothesis profile before any test module imports hypothesis
import pytest
from slurm_cluster import LocalSlurmCluster, missing_binaries

from dl.testing.synthetic import SyntheticConfig, write_synthetic_dataset

SMALL = SyntheticConfig(episodes=6, frames_per_episode=(20, 40), cameras=2, codec="h264", gop=4,
                            episodes_per_file=3, row_group_size=16)


OPEN50 = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "open50"


@pytest.fixture(scope="session")
def open50() -> Path:
    """The team's real LeRobot v3.0 dataset (read-only), in ../shared beside the checkout. Missing: a failure
    under CI (it must run there), a skip with the reason elsewhere."""
    if not (OPEN50 / "meta" / "info.json").is_file():
        message = f"the team's open50 dataset is not at {OPEN50} (../shared/datasets beside the checkout)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return OPEN50


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DL_CACHE_DIR", str(tmp_path / "dl-cache"))
    for node_local in ("SLURM_TMPDIR", "TMPDIR"):  # the remote sources' host cache goes there first
        monkeypatch.delenv(node_local, raising=False)


@pytest.fixture(scope="session")
def dataset_factory(tmp_path_factory):
    """`dataset_factory(**config_fields)` -> path of a generated dataset (cached per config for the session).
    Treat it as read-only; use `writable_copy` to change files."""
    made = {}

    def make(**fields):
        config = SyntheticConfig(**{**SMALL.__dict__, **fields})
        if config not in made:
            made[config] = write_synthetic_dataset(tmp_path_factory.mktemp("ds") / "dataset", config)
        return made[config]

    return make


@pytest.fixture(scope="session")
def small_dataset(dataset_factory):
    """6 episodes of 20-40 frames, 2 cameras (H.264, GOP 4), 3 episodes per file, 16-row row groups."""
    return dataset_factory()


@pytest.fixture(scope="session")
def mixture_roots(dataset_factory, tmp_path_factory):
    """Generated datasets that differ as a mixture's members do (mixture_helpers.A, B, C, TABULAR, TABULAR_SMALL):
    `{"a", "b", "c", "tabular", "tabular_small"}` -> root; b's keys are renamed (mixture_helpers.B_NAMES)."""
    from mixture_helpers import B_NAMES, TABULAR, TABULAR_SMALL, A, B, C, renamed_dataset

    b = renamed_dataset(dataset_factory(**B), tmp_path_factory.mktemp("mixture") / "b", B_NAMES)
    return {"a": dataset_factory(**A), "b": b, "c": dataset_factory(**C), "tabular": dataset_factory(**TABULAR),
            "tabular_small": dataset_factory(**TABULAR_SMALL)}


@pytest.fixture
def in_memory(tmp_path):
    """`in_memory(folder, name)`: a copy of a dataset folder on fsspec's in-memory filesystem, read through `bucket`
    as a remote source (it prefetches); its URL. Removed from memory after the test."""
    import fsspec

    memory, urls = fsspec.filesystem("memory"), []

    def put(folder, name: str) -> str:
        urls.append(f"memory://{tmp_path.name}-{name}")
        memory.put(str(folder), urls[-1], recursive=True)
        return urls[-1]

    yield put
    for url in urls:
        memory.rm(url, recursive=True)


@pytest.fixture
def writable_copy(tmp_path):
    """`writable_copy(path)` -> a private copy of a dataset folder that a test may edit."""

    def copy(path):
        return shutil.copytree(path, tmp_path / "copy")

    return copy


@pytest.fixture
def video_root(dataset_factory):
    """A small video dataset for the pool tests (pool_helpers.VIDEO). torchcodec is imported here, in the
    main process, so forked DataLoader workers inherit it instead of importing it each (~2 s apiece)."""
    import torchcodec.decoders  # noqa: F401
    from pool_helpers import VIDEO

    return dataset_factory(**VIDEO)


@pytest.fixture
def persistent_loaders():
    """A list to put loaders with persistent workers in; their workers are shut down after the test (a
    failed test's traceback would otherwise keep them alive until the session ends)."""
    loaders = []
    yield loaders
    for loader in loaders:
        iterator = getattr(loader, "_iterator", None)
        if iterator is not None and hasattr(iterator, "_shutdown_workers"):
            iterator._shutdown_workers()


def _slurm_unavailable() -> str | None:
    missing = missing_binaries()
    if missing:
        return f"SLURM/munge programs missing ({', '.join(missing)}): scripts/setup.sh installs them with apt"
    if os.geteuid() != 0:
        return "the local SLURM cluster needs root (slurmd runs jobs as their user)"
    return None


@pytest.fixture(scope="session")
def cluster():
    """A real 2-node SLURM cluster on localhost (tests/slurm_cluster.py), started on first use, stopped at
    the end of the session; clients find it through SLURM_CONF. Unavailable: a failure under CI (the
    SLURM tests must run there), a skip with the reason elsewhere."""
    why = _slurm_unavailable()
    if why:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    started = LocalSlurmCluster(nodes=2).start()
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(started.conf)
    try:
        yield started
    finally:
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
        started.stop()
