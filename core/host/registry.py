"""The typed registry the `register_*` hooks fill: one table of named factories per plugin kind."""

from collections.abc import Callable
from dataclasses import dataclass

from ..contracts.errors import PluginClashError, PluginError
from .options import FactoryOptions, factory_options

KINDS = ("source", "loader", "decoder", "scheduler")


@dataclass(frozen=True)
class PluginEntry:
    """One registered implementation.

    Attributes:
        kind: one of KINDS.
        name: the name users pass (`--source NAME`).
        factory: builds the implementation; its signature depends on the kind (see `dl.contracts.hookspecs`).
        description: one line for `dl plugins`.
        distribution: the installed distribution that provides it ("dl" for built-ins).
        version: that distribution's version.
        module: the plugin module that registered it.
        options: the factory's options (keyword parameters after the kind's positional ones).
    """

    kind: str
    name: str
    factory: Callable
    description: str
    distribution: str
    version: str
    module: str
    options: FactoryOptions


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
            try:
                options = factory_options(kind, factory)
            except TypeError as exc:
                raise PluginError(f"{distribution} ({module}) registers {kind} {name!r}: {exc}.") from None
            doc = description or (factory.__doc__ or "").strip().split("\n")[0]
            self.add(PluginEntry(kind, name, factory, doc, distribution, version, module, options))

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
        """Look a plugin up (`lerobot-stream` finds `lerobot_stream`: names are identifiers); raise PluginError
        listing the available names of that kind."""
        try:
            return self._entries[(kind, name.replace("-", "_"))]
        except KeyError:
            known = ", ".join(self.names(kind)) or "none"
            raise PluginError(
                f"unknown {kind} {name!r}; registered {kind}s: {known}. Run `dl plugins` to see every plugin "
                "and any that failed to load."
            ) from None

    def check_options(self, kind: str, name: str, options: dict) -> PluginEntry:
        """Check that the named plugin takes `options`, before anything is built (so `dl run` fails at once).

        Raises:
            PluginError: unknown name, or options it does not take / required ones missing; the message
                lists the options it accepts, with their defaults.
        """
        entry = self.get(kind, name)
        unknown, missing = entry.options.unknown(options), entry.options.missing(options)
        if unknown or missing:
            problem = (f"does not take {_names(unknown)}" if unknown else "") + (" and " if unknown and missing else "")
            problem += f"needs {_names(missing)}" if missing else ""
            flag = f"--{kind}-option KEY=VALUE"
            raise PluginError(f"{kind} {name!r} ({entry.distribution}) {problem}. It accepts: "
                              f"{entry.options.describe()} (set them with {flag}).")
        return entry

    def parse_options(self, kind: str, name: str, texts: dict, flag: str | None = None) -> dict:
        """Options given as text (`--loader-option episode_pool_size=32`) converted by the named plugin's
        annotations (`dl.host.options.PluginOption.convert`): `revision=2024` stays the text "2024" for an
        option annotated `str`, `cache_size=8` becomes 8 for an `int` one.

        Raises:
            PluginError: unknown plugin, an option it does not take, or a value its type cannot read (naming
                the flag, the plugin, the option and what it takes).
        """
        entry = self.check_options(kind, name, texts) if texts else self.get(kind, name)
        try:
            return entry.options.convert(texts)
        except ValueError as exc:
            raise PluginError(f"{flag or kind + ' options'}: {kind} {name!r} {exc}.") from None

    def create(self, kind: str, name: str, *args, **options):
        """Build the named implementation from the kind's positional arguments and its options, and check
        it satisfies its kind's interface (`interfaces()`).

        Raises:
            PluginError: unknown name, options it does not take, or the factory returned an object of the
                wrong type (the message names what is missing).
        """
        entry = self.check_options(kind, name, options)
        obj = entry.factory(*args, **options)
        missing = interface_gaps(kind, obj)
        if missing:
            raise PluginError(f"{kind} plugin {name!r} from {entry.distribution} {entry.version} returned "
                              f"{type(obj).__name__}, which is not a dl {kind}: {missing}.")
        return obj

    def names(self, kind: str) -> list[str]:
        """Registered names of one kind, sorted."""
        return sorted(n for k, n in self._entries if k == kind)

    def entries(self) -> list[PluginEntry]:
        """Every entry, sorted by kind then name."""
        return sorted(self._entries.values(), key=lambda e: (KINDS.index(e.kind), e.name))


def _names(names: list[str]) -> str:
    return ("option " if len(names) == 1 else "options ") + ", ".join(names)


def interface_gaps(kind: str, obj) -> str:
    """What `obj` lacks to be an implementation of `kind` ("" when nothing): sources, decoders and schedulers
    subclass `dl.Source`, `dl.Decoder`, `dl.Scheduler`; a loader is a torch `Dataset` (or a peer that makes its own
    batches, `dl.contracts.loader.BatchesItself`) satisfying the `dl.contracts.loader.Loader` protocol."""
    if kind != "loader":
        expected = interfaces()[kind]
        return "" if isinstance(obj, expected) else f"not a {expected.__module__}.{expected.__qualname__}"
    import torch.utils.data

    from ..contracts.loader import BatchesItself, Loader

    if not isinstance(obj, torch.utils.data.Dataset | BatchesItself):
        return "not a torch.utils.data.Dataset or IterableDataset (nor a loader that batches itself)"
    if not isinstance(obj, Loader):
        members = dir(obj)
        lacking = [m for m in ("meta", "decoder", "config", "episodes", "dataloader_needs") if m not in members]
        return f"lacks {', '.join(lacking)} of the dl.contracts.loader.Loader protocol"
    return ""


def interfaces() -> dict[str, type]:
    """The base class each kind's factory must return (a loader: see `interface_gaps`)."""
    from ..contracts.decoder import Decoder
    from ..contracts.loader import Loader
    from ..contracts.scheduler import Scheduler
    from ..contracts.source import Source

    return {"source": Source, "loader": Loader, "decoder": Decoder, "scheduler": Scheduler}
