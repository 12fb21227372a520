"""dl: plugin-based dataloading toolkit and benchmark for LeRobot v3.0 robot-learning datasets.

Library use::

    import dl
    dataset = dl.make_dataset("path/to/dataset", episodes=[0, 3], delta_timestamps={"action": [0, 1/30]})
    loader = dl.make_dataloader(dataset, batch_size=16, num_workers=2)

The package map (each package's docstring says what it holds and what it may import; `tests/test_layout.py`
holds them to it):

- `dl.contracts`: what a plugin implements and is handed (sources, decoders, loaders, schedulers, hook
  specs, `LoaderConfig`, errors); plain Python, no torch.
- `dl.format`: the LeRobot v3.0 format as dl reads it (metadata, rows, windows, samples, checks).
- `dl.dataloader`: the torch DataLoader machinery (building it, batches across workers, resume, ranks).
- `dl.kits`: what plugins build on (`remote`: retries, the prefetch cache; `video`: torchcodec, the decoder
  cache).
- `dl.host`: the plugin host (loading, registry, options, assembly) and the library entry points.
- `dl.mixture`: several datasets as one weighted training stream (`dl.make_mixture`).
- `dl.bench`: the benchmark behind `dl run`, with the scheduler runner; `dl.testing`: synthetic datasets,
  conformance suites, loopback servers; `dl.plugins`: the built-in plugins; `dl.cli`: the command line.

`import dl` is cheap and changes no process-wide state: the names below load on first use (torch only when a loader
is built); dl's warnings are `DlWarning`s through the standard `warnings` machinery, printed as one
`warning: ...` line each by dl's commands (`dl.contracts.errors.show_warnings_as_lines`, which a program may call
too).
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version

_EXPORTS = {
    "make_dataset": "host.api", "make_dataloader": "host.api", "assemble": "host.assembly",
    "make_mixture": "mixture.api", "MixtureDataset": "mixture.dataset",
    "build_dataloader": "dataloader.build", "ResumableDataLoader": "dataloader.dataloaders",
    "merge_states": "dataloader.elastic", "resolve_ranks": "dataloader.world", "World": "dataloader.world",
    "images_to_float": "dataloader.frames",
    "DatasetMeta": "format.metadata", "EpisodeMeta": "format.metadata",
    "LoaderConfig": "contracts.config", "DataLoaderNeeds": "contracts.needs", "DlError": "contracts.errors",
    "DlWarning": "contracts.errors",
    "hookimpl": "contracts.hookspecs", "Source": "contracts.source", "FileSpan": "contracts.source",
    "Prefetches": "contracts.source",
    "Decoder": "contracts.decoder", "DecodedFrames": "contracts.decoder", "FrameRequest": "contracts.decoder",
    "Loader": "contracts.loader", "Resumable": "contracts.loader", "ReportsStats": "contracts.loader",
    "Scheduler": "contracts.scheduler",
}

try:
    __version__ = version("dl")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0"

__all__ = [*sorted(_EXPORTS), "__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dl' has no attribute {name!r}")


def __dir__():
    return __all__
