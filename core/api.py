"""The library entry point: build a loader's dataset from plugin names."""

from .config import LoaderConfig
from .metadata import DatasetMeta
from .plugins_manager import get_plugins


def make_dataset(root: str, *, source: str = "local", loader: str = "map", decoder: str = "cpu",
                 source_options: dict | None = None, decoder_options: dict | None = None, **config):
    """Open the dataset at `root` through the named plugins and return the loader's torch dataset.

    Args:
        root: the dataset root as the source understands it (a folder for `local`).
        source, loader, decoder: registered plugin names (`dl plugins` lists them).
        source_options, decoder_options: keyword arguments for those plugins' factories.
        **config: `LoaderConfig` fields: episodes, delta_timestamps, image_dtype, tolerance_s, seed, options.

    Returns:
        A `torch.utils.data.Dataset` (map) or `IterableDataset` (streaming loaders) yielding
        LeRobot-compatible sample dicts (see `dl.samples`).

    Raises:
        PluginError: an unknown plugin name. DatasetFormatError, MissingFilesError: bad dataset.
    """
    registry = get_plugins().registry
    src = registry.create("source", source, root, **(source_options or {}))
    dec = registry.create("decoder", decoder, **(decoder_options or {}))
    meta = DatasetMeta.load(src)
    return registry.create("loader", loader, meta, dec, LoaderConfig(**config))
