"""The loader conformance suite: what every dl loader must do, as pytest tests to inherit.

    from dl.testing.loader_suite import LoaderSuite

    class TestMyLoader(LoaderSuite):
        loader = "mine"                      # the registered name
        loader_options = {"buffer": 8}       # its factory options, if any

What it checks, on generated datasets (`dl.testing.synthetic`), through `dl.make_dataloader`:
- every frame exactly once per epoch, for world sizes 1-3 x DataLoader workers 0-2 (ranks disjoint);
- the same order for the same seed, another order for another seed and for the next epoch;
- exact resume at any cut point (batches into epoch 0 or 1), with 0 and 2 workers, for loaders that are
  `dl.contracts.loader.Resumable` (others skip those tests, saying so);
- elastic resume: a state saved by W ranks x N workers (batch size B, each rank cut at its own batch),
  merged with `dl.dataloader.elastic.merge_states`, resumed by W' ranks x N' workers (batch size B'): the frames not
  yet emitted come exactly once, the same ones for the same seed, and the next epoch is whole;
- values equal to the `map` loader's at the same global index, windows and `{key}_is_pad` included;
- every dataset LeRobot's own tools write that dl reads (`dl.testing.real_cases.REAL_CASES`: the v2.1 -> v3.0
  converter's mislabelled data files, recorded timestamps, stale info.json totals, PNG and JPEG image features, a
  mixed image + video dataset, a depth camera, annotation columns): each frame served exactly once per epoch with
  LeRobot's values (camera frames read back by their index codes), with and without windows, 0 and 2 workers;
- the same frames when the DataLoader spawns its workers (the loader pickles; NVDEC decoders need spawn);
- over a thousand tiny episodes (`MANY`): every frame once over 2 ranks x 2 workers and an exact resume, in
  seconds (start-up and per-epoch work must not be per-episode Python objects copied into every worker).
Cut points and world shapes are drawn by hypothesis, derandomized so a run is repeatable.
"""

import dataclasses
import itertools
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dl
from dl.contracts.loader import Resumable
from dl.dataloader.elastic import merge_states
from dl.testing.examples import scaled
from dl.testing.real_cases import REAL_CASES, check_batch, every_index, windows
from dl.testing.synthetic import SyntheticConfig, camera_key, write_synthetic_dataset

TABULAR = SyntheticConfig(episodes=7, frames_per_episode=(5, 15), cameras=0, episodes_per_file=3, row_group_size=8)
"""No video, 7 uneven episodes over 3 files: coverage and order tests run fast and split unevenly."""
VIDEO = SyntheticConfig(episodes=4, frames_per_episode=(12, 20), cameras=2, codec="h264", gop=4, episodes_per_file=2)
"""Two H.264 cameras, for value checks against `map`."""
ORDER_VIDEO = dataclasses.replace(TABULAR, cameras=1, width=64, height=64, codec="h264", gop=4)
"""`TABULAR` with one small H.264 camera (12 KB frames), for loaders whose order depends on their videos."""

_GENERATED: dict[SyntheticConfig, object] = {}
"""The `REAL_CASES` datasets generated in this process, shared by every suite subclass."""
MANY = SyntheticConfig(episodes=1200, frames_per_episode=(1, 3), cameras=0, episodes_per_file=420,
                       row_group_size=512, tasks=3)
"""1,200 one-to-three-frame episodes in 3 files, no video: the shape of the Hub's largest datasets' metadata,
small enough to run in seconds."""

SUITE_SETTINGS = settings(max_examples=scaled(8), deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                 HealthCheck.differing_executors])
"""Derandomized (the same examples every run) and without a database, so a suite run is repeatable; each
subclass runs the inherited tests as its own executor."""


class LoaderSuite:
    """Inherit in a test class and set `loader` (and `loader_options`); every test below then runs on it.

    Attributes:
        loader: the registered loader name.
        loader_options: keyword options for its factory.
        batch_size: batch size of the DataLoaders the tests build.
        elastic_options: hypothesis strategies for factory options the elastic resume test varies, e.g.
            `{"episode_pool_size": st.integers(1, 4)}` (over `loader_options`).
        order_dataset: the dataset of the coverage, order and resume tests (default `TABULAR`: no video, fast);
            a loader whose order depends on its videos (the `pool` loader's decode chunks) gives `ORDER_VIDEO`.
        extra_keys: keys the loader's samples hold beyond the `map` loader's (a mixture's `dataset_index`).
    """

    loader: str = ""
    loader_options: dict = {}
    batch_size: int = 3
    elastic_options: dict = {}
    order_dataset: SyntheticConfig = TABULAR
    extra_keys: frozenset = frozenset()

    # ------------------------------------------------------------------------------------ fixtures
    @pytest.fixture(scope="class")
    @classmethod
    def tabular_root(cls, tmp_path_factory):
        return write_synthetic_dataset(tmp_path_factory.mktemp("loader-suite") / "tabular", cls.order_dataset)

    @pytest.fixture(scope="class")
    @classmethod
    def many_root(cls, tmp_path_factory):
        return write_synthetic_dataset(tmp_path_factory.mktemp("loader-suite") / "many", MANY)

    @pytest.fixture(scope="class")
    @classmethod
    def video_root(cls, tmp_path_factory):
        return write_synthetic_dataset(tmp_path_factory.mktemp("loader-suite") / "video", VIDEO)

    @pytest.fixture(scope="class")
    @classmethod
    def real_roots(cls, tmp_path_factory):
        """`{case name: root}` of every `REAL_CASES` dataset, generated on first use in this process."""

        def root(name: str):
            config = REAL_CASES[name].config
            if config not in _GENERATED:
                _GENERATED[config] = write_synthetic_dataset(tmp_path_factory.mktemp("real") / name, config)
            return _GENERATED[config]

        return root

    @pytest.fixture(autouse=True)
    def _private_cache(self, tmp_path, monkeypatch):
        monkeypatch.setenv("DL_CACHE_DIR", str(tmp_path / "dl-cache"))

    # ------------------------------------------------------------------------------------ helpers
    def make(self, root, options: dict | None = None, **config):
        """The loader under test on `root` (config: `dl.LoaderConfig` fields; options over
        `loader_options`)."""
        config.setdefault("image_dtype", "uint8")
        return dl.make_dataset(str(root), loader=self.loader, loader_options={**self.loader_options, **(options or {})},
                               **config)

    def dataloader(self, dataset, num_workers: int, **kwargs):
        kwargs.setdefault("batch_size", self.batch_size)
        return dl.make_dataloader(dataset, num_workers=num_workers, **kwargs)

    @staticmethod
    def indices(batches) -> list[list[int]]:
        return [batch["index"].tolist() for batch in batches]

    def epoch(self, dataset, num_workers: int) -> list[list[int]]:
        """The `index` batches of one pass of a fresh DataLoader."""
        return self.indices(self.dataloader(dataset, num_workers))

    @staticmethod
    def every_index(dataset) -> list[int]:
        return [i for ep in dataset.episodes for i in range(ep.dataset_from_index, ep.dataset_to_index)]

    def require_resumable(self, dataset):
        if not isinstance(dataset, Resumable):
            pytest.skip(f"loader {self.loader!r} is not dl.contracts.loader.Resumable: it does not claim exact resume")

    # ------------------------------------------------------------------------------------ coverage
    @SUITE_SETTINGS
    @given(world_size=st.integers(1, 3), num_workers=st.integers(0, 2), seed=st.integers(0, 2**16))
    def test_every_frame_once_per_epoch(self, tabular_root, world_size, num_workers, seed):
        seen: dict[int, list[int]] = {}
        for rank in range(world_size):
            dataset = self.make(tabular_root, seed=seed, rank=rank, world_size=world_size)
            seen[rank] = [i for batch in self.epoch(dataset, num_workers) for i in batch]
        everything = [i for rank in seen.values() for i in rank]
        assert Counter(everything) == Counter(self.every_index(dataset)), "not every frame exactly once"
        for a in range(world_size):
            for b in range(a + 1, world_size):
                assert not set(seen[a]) & set(seen[b]), f"ranks {a} and {b} share frames"

    # ------------------------------------------------------------------------------------ order
    def test_same_seed_same_order(self, tabular_root):
        for num_workers in (0, 2):
            first = self.epoch(self.make(tabular_root, seed=5), num_workers)
            assert self.epoch(self.make(tabular_root, seed=5), num_workers) == first

    def test_other_seed_other_order(self, tabular_root):
        assert self.epoch(self.make(tabular_root, seed=5), 0) != self.epoch(self.make(tabular_root, seed=6), 0)

    def test_next_epoch_other_order(self, tabular_root):
        loader = self.dataloader(self.make(tabular_root, seed=5), 2, persistent_workers=True)
        first, second = self.indices(loader), self.indices(loader)
        assert sorted(sum(first, [])) == sorted(sum(second, []))
        assert first != second, "two epochs came in the same order"

    # ------------------------------------------------------------------------------------ resume
    @SUITE_SETTINGS
    @given(data=st.data(), num_workers=st.sampled_from([0, 2]), epoch=st.integers(0, 1))
    def test_exact_resume(self, tabular_root, data, num_workers, epoch):
        dataset = self.make(tabular_root, seed=3)
        self.require_resumable(dataset)
        whole = self.dataloader(dataset, num_workers)
        for _ in range(epoch):
            self.indices(whole)
        expected = self.indices(whole)
        cut = data.draw(st.integers(0, len(expected)), label="cut (batches)")

        interrupted = self.dataloader(self.make(tabular_root, seed=3), num_workers)
        for _ in range(epoch):
            self.indices(interrupted)
        got = self.indices(itertools.islice(interrupted, cut))  # stop without asking for batch `cut`
        state = interrupted.state_dict()
        del interrupted

        resumed = self.dataloader(self.make(tabular_root, seed=3), num_workers)
        resumed.load_state_dict(state)
        assert got + self.indices(resumed) == expected
        assert sorted(sum(self.indices(resumed), [])) == sorted(sum(expected, [])), "the next epoch is incomplete"

    def test_resume_state_is_json(self, tabular_root):
        import json

        dataset = self.make(tabular_root, seed=3)
        self.require_resumable(dataset)
        loader = self.dataloader(dataset, 0)
        next(iter(loader))
        state = loader.state_dict()
        assert json.loads(json.dumps(state)) == state

    @SUITE_SETTINGS
    @given(data=st.data(), old=st.tuples(st.integers(1, 3), st.integers(0, 2), st.integers(2, 3)),
           new=st.tuples(st.integers(1, 3), st.integers(0, 2), st.integers(2, 4)), seed=st.integers(0, 2**16))
    def test_elastic_resume_exactly_once(self, tabular_root, data, old, new, seed):
        """W x N workers (batch B) -> W' x N' (batch B'): the rest of the epoch exactly once, deterministic."""
        (world, workers, batch), (world2, workers2, batch2) = old, new
        options = {key: data.draw(strategy, label=key) for key, strategy in self.elastic_options.items()}
        self.require_resumable(self.make(tabular_root, options, seed=seed))
        emitted, states = [], []
        for rank in range(world):
            loader = self.dataloader(self.make(tabular_root, options, seed=seed, rank=rank, world_size=world),
                                     workers, batch_size=batch)
            cut = data.draw(st.integers(0, 12), label=f"cut (batches) of rank {rank}")
            emitted += [i for b in self.indices(itertools.islice(loader, cut)) for i in b]
            states.append(loader.state_dict())
        state = merge_states(states)

        def resumed(rank):
            loader = self.dataloader(self.make(tabular_root, options, seed=seed, rank=rank, world_size=world2),
                                     workers2, batch_size=batch2)
            loader.load_state_dict(state)
            return loader

        rest, following = [], []
        for rank in range(world2):
            loader = resumed(rank)
            rest.append([i for b in self.indices(loader) for i in b])
            following += [i for b in self.indices(loader) for i in b]
        every = Counter(self.every_index(self.make(tabular_root, options, seed=seed)))
        assert Counter(emitted + [i for r in rest for i in r]) == every, "the epoch is not served exactly once"
        assert [i for b in self.indices(resumed(0)) for i in b] == rest[0], "the resumed order is not deterministic"
        assert Counter(following) == every, "the next epoch (in the new shape) is not whole"

    # ------------------------------------------------------------------------------------ values
    @pytest.mark.parametrize("windows", [False, True], ids=["single", "windows"])
    def test_values_equal_map(self, video_root, windows):
        import torch

        cam = camera_key(0)
        delta = {"action": [-2 / 30, 0.0, 1 / 30], cam: [-1 / 30, 0.0], "observation.state": [0.0, 3 / 30]}
        config = {"delta_timestamps": delta if windows else None, "image_dtype": "uint8"}
        reference = dl.make_dataset(str(video_root), loader="map", **config)
        dataset = self.make(video_root, **config)
        checked = 0
        for sample in dataset:
            expected = reference[reference.position_of(int(sample["index"]))]
            assert set(sample) - self.extra_keys == set(expected), f"keys differ at index {int(sample['index'])}"
            for key, value in expected.items():
                if isinstance(value, torch.Tensor):
                    assert torch.equal(sample[key], value), f"{key} differs at index {int(sample['index'])}"
                else:
                    assert sample[key] == value, f"{key} differs at index {int(sample['index'])}"
            checked += 1
        assert checked == len(self.every_index(dataset))

    # ------------------------------------------------------------------------------------ real datasets
    @pytest.mark.parametrize(("num_workers", "windowed"), [(0, True), pytest.param(2, False, marks=pytest.mark.slow)],
                             ids=["windows-0", "single-2"])
    @pytest.mark.parametrize("case", sorted(REAL_CASES))
    def test_real_dataset_cases(self, real_roots, case, num_workers, windowed):
        """Each frame of a dataset written as LeRobot's tools write it, once, with LeRobot's values: with windows
        and float32 frames in this process, and without windows and with uint8 frames through 2 DataLoader workers
        (both conversions, both ways of serving)."""
        import warnings

        real = REAL_CASES[case]
        delta = windows(real.config) if windowed else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the cases' one-line notices (tested by dl's own tests)
            dataset = self.make(real_roots(case), seed=2, delta_timestamps=delta,
                                image_dtype="float32" if windowed else "uint8", **real.options)
            batches = self.dataloader(dataset, num_workers)
            seen = [i for batch in batches for i in check_batch(real.config, batch, delta)]
        assert Counter(seen) == Counter(every_index(real.config, real.options)), "not every frame exactly once"

    # ------------------------------------------------------------------------------------ scale
    @pytest.mark.slow  # 2 ranks x 2 DataLoader workers, twice
    def test_many_tiny_episodes(self, many_root):
        """Every frame of thousands of episodes once over 2 ranks x 2 workers; a cut epoch resumes exactly."""
        batch = {"batch_size": 64}
        seen = []
        for rank in range(2):
            dataset = self.make(many_root, seed=4, rank=rank, world_size=2)
            assert len(dataset.episodes) == MANY.episodes
            seen += [i for b in self.indices(self.dataloader(dataset, 2, **batch)) for i in b]
        assert Counter(seen) == Counter(self.every_index(dataset)), "not every frame exactly once"
        dataset = self.make(many_root, seed=4)
        if not isinstance(dataset, Resumable):
            return
        expected = self.indices(self.dataloader(dataset, 2, **batch))
        interrupted = self.dataloader(self.make(many_root, seed=4), 2, **batch)
        got = self.indices(itertools.islice(interrupted, len(expected) // 2))
        state = interrupted.state_dict()
        del interrupted
        resumed = self.dataloader(self.make(many_root, seed=4), 2, **batch)
        resumed.load_state_dict(state)
        assert got + self.indices(resumed) == expected

    @pytest.mark.slow  # spawned DataLoader workers import torch and dl anew
    def test_spawned_workers(self, tabular_root):
        dataset = self.make(tabular_root, seed=1)
        spawned = self.indices(self.dataloader(dataset, 1, multiprocessing_context="spawn"))
        assert Counter(sum(spawned, [])) == Counter(self.every_index(dataset))
        assert spawned == self.epoch(self.make(tabular_root, seed=1), 1)
