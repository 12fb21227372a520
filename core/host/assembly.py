"""The one assembly path: source -> metadata -> decoder -> loader, from plugin names and options.

`dl.make_dataset`, the benchmark's run process, `dl run`'s up-front checks and `dl info` all build
through these functions, so a plugin is created, option-checked and validated the same way everywhere.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from ..contracts.config import LoaderConfig
from ..contracts.decoder import Decoder
from ..contracts.loader import Loader
from ..contracts.source import Source
from ..format.feature_selection import with_features
from ..format.metadata import DatasetMeta
from .manager import get_plugins
from .reconcile import reconcile_open_files
from .registry import Registry


@dataclass
class Assembly:
    """The plugins of one dataset pipeline, built and wired: `loader.meta.source` is `source`,
    `loader.decoder` is `decoder` (possibly wrapped, e.g. by the benchmark's timer); `decoder_cache`: the open
    files the host settled on for the decoder (`dl.host.reconcile`)."""

    source: Source
    meta: DatasetMeta
    decoder: Decoder
    loader: Loader
    decoder_cache: dict = field(default_factory=dict)


def open_source(root: str, source: str = "local", options: dict | None = None,
                registry: Registry | None = None) -> Source:
    """Build the named source plugin on `root`.

    Raises:
        PluginError: unknown source or options it does not take. DlError: the source cannot use `root`.
    """
    return (registry or get_plugins().registry).create("source", source, root, **(options or {}))


def open_dataset(root: str, source: str = "local", options: dict | None = None, *,
                 snapshot: str | dict | None = None, registry: Registry | None = None) -> DatasetMeta:
    """Source -> metadata: build the source and read the dataset's metadata through it (or rebuild it from the
    `metadata.json` of a `DatasetMeta.write_snapshot()` taken earlier in this run, its path or its contents,
    without reading anything).

    Raises:
        PluginError, DlError: as `open_source`. DatasetFormatError: not a LeRobot v3.0 dataset.
    """
    src = open_source(root, source, options, registry)
    return DatasetMeta.from_snapshot(src, snapshot) if snapshot is not None else DatasetMeta.load(src)


def build_decoder(decoder: str = "cpu", options: dict | None = None, registry: Registry | None = None) -> Decoder:
    """Build the named decoder plugin.

    Raises:
        PluginError: unknown decoder or options it does not take.
    """
    return (registry or get_plugins().registry).create("decoder", decoder, **(options or {}))


def build_loader(meta: DatasetMeta, loader: str = "map", decoder: str | Decoder = "cpu", *,
                 config: LoaderConfig | None = None, loader_options: dict | None = None,
                 decoder_options: dict | None = None, wrap_decoder: Callable[[Decoder], Decoder] | None = None,
                 registry: Registry | None = None) -> Assembly:
    """Metadata -> decoder -> loader.

    Args:
        meta: the dataset's metadata (from `open_dataset`).
        loader: a registered loader name; `loader_options` are its factory's keyword options.
        decoder: a registered decoder name (built with `decoder_options`) or a decoder instance.
        config: what the loader is asked to produce (default: `LoaderConfig()`).
        wrap_decoder: applied to the decoder before the loader gets it (the benchmark's timer).

    Raises:
        PluginError: unknown plugin, options it does not take, or a factory that returns no loader.
        DlError: the loader refuses the selection or options (missing files, bad windows...).
    """
    registry = registry or get_plugins().registry
    registry.check_options("loader", loader, loader_options or {})  # fail before building the decoder
    dec = decoder if isinstance(decoder, Decoder) else build_decoder(decoder, decoder_options, registry)
    dec = wrap_decoder(dec) if wrap_decoder else dec
    config = config or LoaderConfig()
    if config.features is not None:  # a view of the selected features: other cameras and columns are never read
        meta = with_features(meta, list(config.features), config.delta_timestamps)
    built = registry.create("loader", loader, meta, dec, config, **(loader_options or {}))
    return Assembly(meta.source, meta, dec, built, reconcile_open_files(loader, built, dec))


def assemble(root: str, *, source: str = "local", loader: str = "map", decoder: str = "cpu",
             source_options: dict | None = None, loader_options: dict | None = None,
             decoder_options: dict | None = None, config: LoaderConfig | None = None) -> Assembly:
    """Source -> metadata -> decoder -> loader in one call (`open_dataset` then `build_loader`)."""
    meta = open_dataset(root, source, source_options)
    return build_loader(meta, loader, decoder, config=config, loader_options=loader_options,
                        decoder_options=decoder_options)
