"""Loader `map`: a map-style dataset over the selected episodes, memory-mapped Arrow rows, in a seeded
per-epoch order sharded over ranks (`dataset`, `sampler`, `arrow_store`)."""

from dl.contracts.hookspecs import hookimpl

from .dataset import MapDataset


@hookimpl
def register_loaders(register):
    register("map", MapDataset, "map-style Dataset, memory-mapped Arrow rows, seeded shuffle sharded over ranks")
