"""dl: plugin-based dataloading toolkit and benchmark for LeRobot v3.0 robot-learning datasets.

Library use::

    import dl
    dataset = dl.make_dataset("path/to/dataset", episodes=[0, 3], delta_timestamps={"action": [0, 1/30]})
    loader = dl.make_dataloader(dataset, batch_size=16, num_workers=2)

The top level holds the contracts and the plugin host: `hookspecs`, `registry`, `plugin_options`,
`plugins_manager` (loading plugins); `source`, `loader`, `decoder`, `scheduler` (what each kind of
plugin provides); `config`, `world`, `dataloader`, `frames`, `resume`, `elastic`, `assembly`, `api` (how they
are put together, camera frames across the DataLoader's worker boundary included); `errors`, `paths`,
`seeding`, `shared_counters`, `decoder_cache`, `torchcodec_video`, `units` (shared helpers); `retry`,
`file_cache`, `remote_source` (the one wrapper remote sources read through: retries, counters, prefetch);
`diagnose` (the decode path of one frame per camera, step by step).
Subpackages: `dl.format` (the LeRobot v3.0 format), `dl.bench` (the benchmark), `dl.testing`
(synthetic datasets and conformance suites), `dl.plugins` (built-in plugins), `dl.cli`.

May import: `dl.format` (the top level's modules may import each other); never `dl.bench`, `dl.testing`,
`dl.plugins` or `dl.cli`.
`import dl` is cheap: names below load on first use (torch only when a loader is built).
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version

_EXPORTS = {
    "make_dataset": "api", "make_dataloader": "api", "assemble": "assembly", "LoaderConfig": "config",
    "DecodedFrames": "decoder", "Decoder": "decoder", "FrameRequest": "decoder", "DlError": "errors",
    "hookimpl": "hookspecs", "images_to_float": "frames",
    "DatasetMeta": "format.metadata", "EpisodeMeta": "format.metadata", "Loader": "loader",
    "Resumable": "loader", "ReportsStats": "loader", "ResumableDataLoader": "resume", "Scheduler": "scheduler",
    "FileSpan": "source", "Source": "source", "World": "world", "build_dataloader": "dataloader",
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
