"""The four hooks a dl plugin implements. Each receives a `register(name, factory, description="")`
callback built by the host (see `dl.host.registry`), so validation and name clashes live in one place.

A plugin module implements any subset with `@dl.hookimpl` and is listed under the `dl` entry-point
group of its distribution. The hooks fire once per process, when `dl.host.manager.load_plugins()`
first runs (the first `dl` command, `dl.make_dataset()` call or benchmark run that needs a plugin).
Every factory takes its kind's positional arguments, then its own options as keyword arguments with
defaults (`dl plugins` lists them; an option a factory does not take is refused before anything runs).
"""

import pluggy

hookspec = pluggy.HookspecMarker("dl")
hookimpl = pluggy.HookimplMarker("dl")


@hookspec
def register_sources(register):
    """Register dataset sources: `factory(root: str, **options) -> dl.Source`."""


@hookspec
def register_loaders(register):
    """Register loaders: `factory(meta: dl.DatasetMeta, decoder: dl.Decoder, config: dl.LoaderConfig,
    **options)` -> a torch `Dataset` or `IterableDataset` satisfying `dl.contracts.loader.Loader`."""


@hookspec
def register_decoders(register):
    """Register video decoders: `factory(**options) -> dl.Decoder`."""


@hookspec
def register_schedulers(register):
    """Register schedulers: `factory(**options) -> dl.Scheduler`."""
