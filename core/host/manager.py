"""Load plugins from the `dl` entry-point group into a Registry.

Built-ins (`dl.plugins.*`) are listed in dl's own pyproject under the same group, so they load exactly
like third-party plugins. One plugin failing to import is recorded in `Plugins.errors` and shown by
`dl plugins`, not fatal, unless DL_STRICT_PLUGINS=1. DL_DISABLE_PLUGINS=name,... blocks plugins by
entry-point name or module before they are imported.
"""

import os
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType

import pluggy

from ..contracts import hookspecs
from ..contracts.errors import PluginClashError, PluginError
from .registry import KINDS, Registry

GROUP = "dl"


@dataclass
class LoadedPlugin:
    """A plugin module and the distribution that ships it (`value`: the entry point's "module[:attr]")."""

    name: str
    module: ModuleType
    distribution: str
    version: str
    value: str


@dataclass
class Plugins:
    """The result of loading: the filled registry, the loaded plugin modules, and load errors
    (`"distribution: entry point: error"` lines)."""

    registry: Registry
    loaded: list[LoadedPlugin] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _fail(result: Plugins, strict: bool, dist: str, version: str, name: str, exc: Exception) -> None:
    if strict:
        raise PluginError(f"plugin {name} from {dist} {version} failed to load: {exc}") from exc
    result.errors.append(f"{dist}: {name}: {type(exc).__name__}: {exc}")


def _env_list(name: str) -> set[str]:
    return {x.strip() for x in os.environ.get(name, "").split(",") if x.strip()}


def make_plugin_manager() -> pluggy.PluginManager:
    """A fresh PluginManager with dl's hook specs and no plugins (tests build their own this way)."""
    pm = pluggy.PluginManager(GROUP)
    pm.add_hookspecs(hookspecs)
    return pm


def load_plugins(eps: list[EntryPoint] | None = None, strict: bool | None = None) -> Plugins:
    """Import every plugin of the `dl` entry-point group and run its `register_*` hooks.

    Args:
        eps: entry points to load (default: the installed ones of group "dl").
        strict: raise on the first plugin that fails to load (default: DL_STRICT_PLUGINS=1).

    Raises:
        PluginClashError: two plugins claim the same name in one kind (always).
        PluginError: a plugin fails to import, to validate or to register, in strict mode (otherwise the
            failure is recorded in `Plugins.errors` and the plugin's other names stay usable).
    """
    strict = os.environ.get("DL_STRICT_PLUGINS") == "1" if strict is None else strict
    eps = list(entry_points(group=GROUP)) if eps is None else eps
    disabled = _env_list("DL_DISABLE_PLUGINS")
    pm = make_plugin_manager()
    result = Plugins(Registry())
    for ep in sorted(eps, key=lambda e: (e.dist.name if e.dist else "", e.name)):
        dist = ep.dist.name if ep.dist else "unknown"
        version = ep.dist.version if ep.dist else "?"
        if ep.name in disabled or ep.value in disabled:
            continue
        plugin_name = f"{dist}:{ep.name}"
        try:
            module = ep.load()
            pm.register(module, name=plugin_name)
            pm.check_pending()  # an implementation matching no hook spec (a typo'd hook name)
        except Exception as exc:  # a broken plugin must not take the host down
            if pm.has_plugin(plugin_name):
                pm.unregister(name=plugin_name)
            _fail(result, strict, dist, version, ep.name, exc)
            continue
        result.loaded.append(LoadedPlugin(ep.name, module, dist, version, ep.value))
    for plugin in result.loaded:
        others = [p.module for p in result.loaded if p is not plugin]
        for kind in KINDS:
            call = pm.subset_hook_caller(f"register_{kind}s", remove_plugins=others)
            register = result.registry.register_callback(kind, plugin.distribution, plugin.version, plugin.value)
            try:
                call(register=register)
            except PluginClashError:
                raise
            except Exception as exc:
                _fail(result, strict, plugin.distribution, plugin.version, plugin.name, exc)
    return result


_loaded: Plugins | None = None


def get_plugins() -> Plugins:
    """The process-wide plugin set, loaded on first use."""
    global _loaded
    if _loaded is None:
        _loaded = load_plugins()
    return _loaded
