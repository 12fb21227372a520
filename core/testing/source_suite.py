"""The source conformance suite: what every dl source must do, as pytest tests to inherit.

    from dl.testing.source_suite import SourceSuite

    class TestZipSource(SourceSuite):
        def make_source(self, dataset_dir, workdir):
            archive = zip_it(dataset_dir, workdir / "ds.zip")   # put the folder where your source reads
            return zip_source(str(archive))

`make_source(dataset_dir, workdir)` gets a generated LeRobot v3.0 dataset folder and a scratch folder, and
returns a `dl.Source` serving that dataset (copy or upload it first if your source reads elsewhere).
What it checks: listing (paths and sizes), whole reads and byte ranges equal to the files, fingerprints
built from the file (equal across calls, instances, pickling and copies of the same bytes; different for
other bytes), `SourceFileNotFoundError` for a missing file, `UnsafePathError` for a path that leaves the
root, reads from forked processes, `DatasetMeta.load` through the source, and a loader serving every frame through
it. A source needs only `dl.Source`'s few methods (list, stat, open, read); one that also fetches ahead
(`dl.contracts.source.Prefetches`, as dl's remote sources) is driven through that protocol by the same loader.
"""

import json
import multiprocessing
import pickle
import shutil
from pathlib import Path

import fsspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dl.contracts.errors import SourceFileNotFoundError, UnsafePathError
from dl.contracts.source import Source
from dl.format.metadata import DatasetMeta
from dl.testing.examples import scaled
from dl.testing.synthetic import SyntheticConfig, write_synthetic_dataset

DATASET = SyntheticConfig(episodes=3, frames_per_episode=(8, 12), cameras=1, codec="h264", gop=4, episodes_per_file=2)

SUITE_SETTINGS = settings(max_examples=scaled(25), deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                 HealthCheck.differing_executors])


def _local_files(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()}


def _read_in_child(source: Source, rel: str, queue) -> None:
    try:
        queue.put(source.read_bytes(rel))
    except BaseException as exc:  # reported to the parent, which fails the test with it
        queue.put(exc)


class SourceSuite:
    """Inherit in a test class and implement `make_source`; every test below then runs on that source."""

    def make_source(self, dataset_dir: Path, workdir: Path) -> Source:
        """A source serving the dataset in `dataset_dir` (scratch space: `workdir`)."""
        raise NotImplementedError("implement make_source(dataset_dir, workdir) in your test class")

    # ------------------------------------------------------------------------------------ fixtures
    @pytest.fixture(scope="class")
    @classmethod
    def dataset_dir(cls, tmp_path_factory) -> Path:
        return write_synthetic_dataset(tmp_path_factory.mktemp("source-suite") / "dataset", DATASET)

    @pytest.fixture
    def source(self, dataset_dir, tmp_path) -> Source:
        made = self.make_source(dataset_dir, tmp_path)
        assert isinstance(made, Source), f"make_source returned {type(made).__name__}, not a dl.Source"
        return made

    # ------------------------------------------------------------------------------------ listing
    def test_lists_every_file_with_its_size(self, source, dataset_dir):
        expected = _local_files(dataset_dir)
        listed = {}
        for folder in ("meta", "data", "videos"):
            part = source.list_files(folder)
            assert list(part) == sorted(part), f"list_files({folder!r}) is not sorted"
            assert all(p.startswith(f"{folder}/") for p in part), f"list_files({folder!r}) strays outside it"
            listed.update(part)
        assert listed == expected

    def test_missing_folder_lists_empty(self, source):
        assert source.list_files("no_such_folder") == {}

    # ------------------------------------------------------------------------------------ reads
    def test_open_and_read_bytes_return_the_file(self, source, dataset_dir):
        for rel in _local_files(dataset_dir):
            data = (dataset_dir / rel).read_bytes()
            with source.open(rel) as f:
                assert f.read() == data, rel
            assert source.read_bytes(rel) == data, rel

    @SUITE_SETTINGS
    @given(data=st.data())
    def test_byte_ranges(self, source, dataset_dir, data):
        files = _local_files(dataset_dir)
        rel = data.draw(st.sampled_from(sorted(files)), label="file")
        size = files[rel]
        start = data.draw(st.integers(0, size), label="start")
        end = data.draw(st.integers(start, size), label="end")
        assert source.read_bytes(rel, start, end) == (dataset_dir / rel).read_bytes()[start:end]
        with source.open(rel) as f:
            f.seek(start)
            assert f.read(end - start) == (dataset_dir / rel).read_bytes()[start:end]

    def test_reads_from_forked_processes(self, source, dataset_dir):
        rel = next(r for r in _local_files(dataset_dir) if r.endswith(".mp4"))
        source.read_bytes(rel)  # the parent has used the source (open files, connections) before forking
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        children = [ctx.Process(target=_read_in_child, args=(source, rel, queue)) for _ in range(2)]
        for child in children:
            child.start()
        results = [queue.get(timeout=60) for _ in children]
        for child in children:
            child.join(timeout=60)
        expected = (dataset_dir / rel).read_bytes()
        for result in results:
            if isinstance(result, BaseException):
                raise result
            assert result == expected
        assert source.read_bytes(rel) == expected

    def test_pickles(self, source, dataset_dir):
        copy = pickle.loads(pickle.dumps(source))
        assert copy.url == source.url
        assert copy.read_bytes("meta/info.json") == (dataset_dir / "meta/info.json").read_bytes()

    # ------------------------------------------------------------------------------------ fingerprints
    def test_fingerprint_depends_on_the_file_only(self, source, dataset_dir, tmp_path):
        files = sorted(_local_files(dataset_dir))
        first = {rel: source.fingerprint(rel) for rel in files}
        assert {rel: source.fingerprint(rel) for rel in files} == first, "fingerprints change between calls"
        again = self.make_source(dataset_dir, tmp_path / "again")
        assert {rel: again.fingerprint(rel) for rel in files} == first, "fingerprints change between instances"
        assert {rel: pickle.loads(pickle.dumps(source)).fingerprint(rel) for rel in files} == first

    def test_fingerprint_changes_with_content(self, source, dataset_dir, tmp_path):
        copy = tmp_path / "edited"
        shutil.copytree(dataset_dir, copy)  # copy2: the same bytes and modification times
        with open(copy / "meta/stats.json", "ab") as f:  # longer
            f.write(b"\n")
        text = (copy / "meta/info.json").read_text()
        robot = json.loads(text)["robot_type"]
        (copy / "meta/info.json").write_text(text.replace(f'"{robot}"', f'"{"x" * len(robot)}"'))  # same size
        other = self.make_source(copy, tmp_path / "work-edited")
        for edited in ("meta/stats.json", "meta/info.json"):
            assert other.fingerprint(edited) != source.fingerprint(edited), f"edited {edited} kept its fingerprint"
        assert other.fingerprint("meta/tasks.parquet") == source.fingerprint("meta/tasks.parquet"), (
            "the same bytes got another fingerprint: it must come from the file, not the object or the path")

    # ------------------------------------------------------------------------------------ errors
    @pytest.mark.parametrize("call", ["open", "read_bytes", "fingerprint"])
    def test_missing_file(self, source, call):
        with pytest.raises(SourceFileNotFoundError, match="no_such_file.json"):
            result = getattr(source, call)("meta/no_such_file.json")
            if call == "open":
                result.read()

    @pytest.mark.parametrize("rel", ["../outside.json", "meta/../../outside.json", "/etc/hostname"])
    def test_path_escaping_the_root_is_refused(self, source, rel):
        for call in (source.open, source.read_bytes, source.fingerprint):
            with pytest.raises(UnsafePathError, match="escapes the dataset root"):
                call(rel)

    # ------------------------------------------------------------------------------------ metadata
    def test_metadata_loads_through_the_source(self, source, dataset_dir):
        meta = DatasetMeta.load(source)
        assert sorted(meta.episodes) == list(range(DATASET.episodes))
        assert meta.files == _local_files(dataset_dir)

    def test_a_loader_serves_every_frame_through_the_source(self, source, dataset_dir):
        from dl.contracts.config import LoaderConfig
        from dl.host.assembly import build_loader

        meta = DatasetMeta.load(source)
        loader = build_loader(meta, "pool", "cpu", config=LoaderConfig(image_dtype="uint8")).loader
        served = sorted(int(sample["index"]) for sample in loader)
        local = DatasetMeta.load(Source(fsspec.filesystem("file"), str(dataset_dir), "local"))
        assert served == list(range(local.total_frames))
