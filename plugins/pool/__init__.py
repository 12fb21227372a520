"""Loader `pool`: a streaming episode pool with uniform shuffle, video decoded chunk by chunk in order under a
byte budget, exact and elastic resume and rank/worker splitting (`dataset`), and what only it uses: the
emission orders (`episode_pool`, `chunk_pool`) and the order they first draw the open episodes and chunks in
(`first_draws`), the decoded chunks (`decode_buffer`), the per-epoch dealing
of episodes to consumers (`partition`) and an epoch's segments after an elastic resume (`segments`)."""

from dl.contracts.hookspecs import hookimpl

from .dataset import PoolDataset


@hookimpl
def register_loaders(register):
    register("pool", PoolDataset,
             "streaming episode pool: uniform shuffle, chunks decoded in order under a byte budget, exact resume")
