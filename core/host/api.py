"""The library entry points: a loader from plugin names, and the DataLoader that goes with it."""

from ..contracts.config import LoaderConfig
from ..dataloader.build import build_dataloader
from .assembly import assemble


def make_dataset(root: str, *, source: str = "local", loader: str = "map", decoder: str = "cpu",
                 source_options: dict | None = None, loader_options: dict | None = None,
                 decoder_options: dict | None = None, **config):
    """Open the dataset at `root` through the named plugins and return the loader (a torch dataset).

    Args:
        root: the dataset root as the source understands it (a folder for `local`).
        source, loader, decoder: registered plugin names (`dl plugins` lists them and their options).
        source_options, loader_options, decoder_options: keyword options of those plugins' factories
            (e.g. `loader_options={"episode_pool_size": 32}` for `pool`).
        **config: `dl.LoaderConfig` fields: episodes, delta_timestamps, image_dtype, tolerance_s, seed, rank,
            world_size.

    Returns:
        A `torch.utils.data.Dataset` (`map`) or `IterableDataset` (`pool`) satisfying `dl.contracts.loader.Loader`,
        yielding LeRobot-compatible sample dicts (see docs/library.md).

    Raises:
        PluginError: an unknown plugin name or an option it does not take (the message lists the accepted
            ones). DatasetFormatError, MissingFilesError: a bad dataset.
    """
    return assemble(root, source=source, loader=loader, decoder=decoder, source_options=source_options,
                    loader_options=loader_options, decoder_options=decoder_options,
                    config=LoaderConfig(**config)).loader


def make_dataloader(dataset, *, batch_size: int | None = 16, num_workers: int = 0, **kwargs):
    """A DataLoader for a dl loader, built the way `dl run` builds it: the loader's order (its sampler,
    seeded per epoch and sharded per rank), what its decoder and source need (start method,
    `pin_memory`), and `dl.ResumableDataLoader` (`state_dict()` / `load_state_dict()`) for loaders that
    resume. `kwargs` go to `dl.dataloader.build.build_dataloader` (seed, prefetch_factor, persistent_workers,
    other DataLoader arguments).

    Raises:
        PluginError: the plugins' needs contradict each other or `kwargs`.
    """
    return build_dataloader(dataset, batch_size=batch_size, num_workers=num_workers, **kwargs)
