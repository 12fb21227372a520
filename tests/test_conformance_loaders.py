"""The built-in loaders pass dl.testing's loader conformance suite."""

import pytest
from hypothesis import strategies as st

from dl.testing.loader_suite import LoaderSuite

# 3 DataLoader workers on a 2-core machine are intended here (world size 3 x 2 workers)
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create .* worker processes")


class TestMapLoader(LoaderSuite):
    loader = "map"


class TestPoolLoader(LoaderSuite):
    loader = "pool"
    loader_options = {"episode_pool_size": 2}
    elastic_options = {"episode_pool_size": st.integers(1, 4)}
