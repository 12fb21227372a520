"""dl.testing's loader conformance suite on mixtures (weights by frames: every frame of every member once per epoch).
Each suite dataset is split in two members by episode, so the suite's checks by global index hold across members."""

import pytest
from hypothesis import strategies as st

import dl
from dl.host.assembly import open_dataset
from dl.testing.loader_suite import LoaderSuite

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create .* worker processes",
                                        "ignore:mixture. ranks get", "ignore:mixture. rank .* has no samples",
                                        "ignore:pool loader. ranks get")


class MixtureSuite(LoaderSuite):
    """The suite's loader under test is a mixture of `member_loaders` (one per member), the episodes dealt to them in
    turn; `loader_options` (and the suite's elastic options) go to the `pool` members."""

    member_loaders: tuple[str, ...] = ()
    extra_keys = frozenset({"dataset_index"})

    def make(self, root, options: dict | None = None, **config):
        config.setdefault("image_dtype", "uint8")
        seed, rank, world_size = config.pop("seed", 0), config.pop("rank", None), config.pop("world_size", None)
        indices = sorted(config.pop("episodes", None) or open_dataset(str(root)).episodes)  # a case may select
        count = len(self.member_loaders)
        members = [dl.make_dataset(str(root), loader=loader, episodes=indices[i::count], seed=seed + i,
                                   loader_options={**self.loader_options, **(options or {})} if loader == "pool"
                                   else None, **config)
                   for i, loader in enumerate(self.member_loaders)]
        return dl.make_mixture(members, seed=seed, rank=rank, world_size=world_size,
                               names=[f"{loader}{i}" for i, loader in enumerate(self.member_loaders)])


class TestMixtureOfPools(MixtureSuite):
    loader = "mixture of pools"
    member_loaders = ("pool", "pool")
    loader_options = {"episode_pool_size": 2, "decode_budget": 0}
    elastic_options = {"episode_pool_size": st.integers(1, 3)}


class TestMixtureOfAPoolAndAMap(MixtureSuite):
    loader = "mixture of a pool and a map"
    member_loaders = ("pool", "map")
    loader_options = {"episode_pool_size": 2, "decode_budget": 0}
