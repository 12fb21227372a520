"""The built-in loaders pass dl.testing's loader conformance suite."""

import pytest
from hypothesis import strategies as st

from dl.testing.loader_suite import ORDER_VIDEO, LoaderSuite

# 3 DataLoader workers on a 2-core machine are intended here (world size 3 x 2 workers)
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create .* worker processes")


class TestMapLoader(LoaderSuite):
    loader = "map"


class TestPoolLoader(LoaderSuite):
    loader = "pool"
    loader_options = {"episode_pool_size": 2, "decode_budget": 0}
    elastic_options = {"episode_pool_size": st.integers(1, 4)}


class TestPoolLoaderDecodeChunks(LoaderSuite):
    """The pool with its second level on: chunks of consecutive frames decoded in order under a budget. Order
    tests: 64x64 frames (12,288 B), 4-frame chunks of 49,152 B, 600K holds 12; the elastic test draws budgets
    from one chunk (or none: per-sample decode) to all. Values: two 128x96 cameras, 600K holds 2 chunks (1
    with the camera window)."""

    loader = "pool"
    loader_options = {"episode_pool_size": 2, "decode_budget": "600K", "decode_chunk_frames": 4}
    elastic_options = {"episode_pool_size": st.integers(1, 4), "decode_chunk_frames": st.integers(1, 6),
                       "decode_budget": st.sampled_from(["40K", "100K", "400K", "2M"])}
    order_dataset = ORDER_VIDEO
