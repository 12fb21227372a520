"""The four hooks a dl plugin implements. Each receives a `register(name, factory, description="")`
callback built by the host (see `dl.host.registry`), so validation and name clashes live in one place.

A plugin module implements any subset with `@dl.hookimpl` and is listed under the `dl` entry-point
group of its distribution. When the hooks fire: the host first imports every plugin module of the group
(sorted by distribution, then entry-point name), then calls each plugin's hooks in turn, sources, loaders,
decoders, schedulers, each with a `register` bound to that plugin's distribution. That happens once per
process, at the first `dl.host.manager.get_plugins()` (the first `dl` command, `dl.make_dataset()` call or
benchmark run that needs a plugin), and again at every explicit `dl.host.manager.load_plugins()` (tests build
fresh registries this way). Each benchmark run process loads plugins on its own; DataLoader workers load none:
forked workers inherit the built objects and spawned ones receive them pickled (docs/plugins.md, "When the hooks
fire").
Every factory takes its kind's positional arguments, then its own options as keyword arguments with
defaults (`dl plugins` lists them; an option a factory does not take is refused before anything runs).
"""

import pluggy

hookspec = pluggy.HookspecMarker("dl")
hookimpl = pluggy.HookimplMarker("dl")


@hookspec
def register_sources(register):
    """Register dataset sources: `factory(root: str, **options) -> dl.Source`. Fires first of a plugin's hooks
    when the host loads plugins."""


@hookspec
def register_loaders(register):
    """Register loaders: `factory(meta: dl.DatasetMeta, decoder: dl.Decoder, config: dl.LoaderConfig,
    **options)` -> a torch `Dataset` or `IterableDataset` satisfying `dl.contracts.loader.Loader`. Fires after
    the plugin's `register_sources`."""


@hookspec
def register_decoders(register):
    """Register video decoders: `factory(**options) -> dl.Decoder`. Fires after the plugin's
    `register_loaders`."""


@hookspec
def register_schedulers(register):
    """Register schedulers: `factory(**options) -> dl.Scheduler`. Fires last of a plugin's hooks."""
