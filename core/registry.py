"""The typed registry the `register_*` hooks fill: one table of named factories per plugin kind."""

import inspect
from collections.abc import Callable
from dataclasses import dataclass

from .errors import PluginClashError, PluginError

KINDS = ("source", "loader", "decoder", "scheduler")


@dataclass(frozen=True)
class PluginEntry:
    """One registered implementation.

    Attributes:
        kind: one of KINDS.
        name: the name users pass (`--source NAME`).
        factory: builds the implementation; its signature depends on the kind (see `dl.hookspecs`).
        description: one line for `dl plugins`.
        distribution: the installed distribution that provides it ("dl" for built-ins).
        version: that distribution's version.
        module: the plugin module that registered it.
    """

    kind: str
    name: str
    factory: Callable
    description: str
    distribution: str
    version: str
    module: str


class Registry:
    """Named factories per kind. Two plugins registering the same name in one kind is a PluginError
    naming both distributions."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], PluginEntry] = {}

    def register_callback(self, kind: str, distribution: str, version: str, module: str) -> Callable:
        """Return the `register(name, factory, description="")` callback handed to one plugin's hook."""

        def register(name: str, factory: Callable, description: str = "") -> None:
            if not isinstance(name, str) or not name.isidentifier():
                raise PluginError(f"{distribution} ({module}) registers {kind} {name!r}: names are identifiers.")
            if not callable(factory):
                raise PluginError(f"{distribution} ({module}) registers {kind} {name!r} with a non-callable.")
            doc = description or (factory.__doc__ or "").strip().split("\n")[0]
            entry = PluginEntry(kind, name, factory, doc, distribution, version, module)
            self.add(entry)

        return register

    def add(self, entry: PluginEntry) -> None:
        """Add an entry; raise PluginError if (kind, name) is already taken."""
        key = (entry.kind, entry.name)
        if key in self._entries:
            old = self._entries[key]
            raise PluginClashError(
                f"{entry.kind} plugin name {entry.name!r} is registered twice: by {old.distribution} "
                f"{old.version} ({old.module}) and by {entry.distribution} {entry.version} ({entry.module}). "
                f"Uninstall one, or block one with DL_DISABLE_PLUGINS={entry.module}."
            )
        self._entries[key] = entry

    def get(self, kind: str, name: str) -> PluginEntry:
        """Look a plugin up; raise PluginError listing the available names of that kind."""
        try:
            return self._entries[(kind, name)]
        except KeyError:
            known = ", ".join(self.names(kind)) or "none"
            raise PluginError(
                f"unknown {kind} {name!r}; registered {kind}s: {known}. Run `dl plugins` to see every plugin "
                "and any that failed to load."
            ) from None

    def create(self, kind: str, name: str, *args, **kwargs):
        """Build the named implementation and check it satisfies its kind's interface (`interfaces()`).

        Raises:
            PluginError: unknown name, options the factory does not take, or the factory returned an
                object of the wrong type.
        """
        entry = self.get(kind, name)
        try:
            signature = inspect.signature(entry.factory)
        except ValueError:  # some builtins have none; the call itself will complain
            signature = None
        if signature is not None:
            try:
                signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise PluginError(f"{kind} plugin {name!r} ({entry.distribution}) cannot take these options: "
                                  f"{exc}. It accepts {signature}.") from None
        obj = entry.factory(*args, **kwargs)
        expected = interfaces()[kind]
        if not isinstance(obj, expected):
            raise PluginError(
                f"{kind} plugin {name!r} from {entry.distribution} {entry.version} returned "
                f"{type(obj).__name__}, not a {expected.__module__}.{expected.__qualname__}."
            )
        return obj

    def names(self, kind: str) -> list[str]:
        """Registered names of one kind, sorted."""
        return sorted(n for k, n in self._entries if k == kind)

    def entries(self) -> list[PluginEntry]:
        """Every entry, sorted by kind then name."""
        return sorted(self._entries.values(), key=lambda e: (KINDS.index(e.kind), e.name))


def interfaces() -> dict[str, type]:
    """The type each kind's factory must return."""
    import torch.utils.data

    from .decoder import Decoder
    from .scheduler import Scheduler
    from .source import Source

    return {"source": Source, "loader": torch.utils.data.Dataset, "decoder": Decoder, "scheduler": Scheduler}
