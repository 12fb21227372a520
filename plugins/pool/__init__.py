"""Loader `pool`: a streaming episode pool with uniform shuffle, decode on exit, exact resume and
rank/worker splitting (`dataset`), and the pure functions only it uses: the pool's emission order
(`episode_pool`) and the per-epoch dealing of episodes to consumers (`partition`)."""

from dl.hookspecs import hookimpl

from .dataset import PoolDataset


@hookimpl
def register_loaders(register):
    register("pool", PoolDataset, "streaming episode pool: uniform shuffle, decode on exit, exact resume")
