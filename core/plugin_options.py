"""A plugin's options, read from its factory: the keyword parameters after the kind's positional ones,
with their defaults and the help its docstring's `Args:` section gives them."""

import inspect
import re
from dataclasses import dataclass
from typing import Any

POSITIONAL = {"source": ("root",), "loader": ("meta", "decoder", "config"), "decoder": (), "scheduler": ()}
"""What each kind's factory receives positionally (see `dl.hookspecs`); everything else is an option."""

REQUIRED = inspect.Parameter.empty


@dataclass(frozen=True)
class PluginOption:
    """One option a factory takes: `name`, `default` (`REQUIRED` when it has none), `annotation` as written,
    and `help` from the factory's docstring."""

    name: str
    default: Any
    annotation: str
    help: str

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def to_dict(self) -> dict:
        """JSON-able form for `dl plugins --json` (a default that is not JSON-able is shown as its repr)."""
        default = None if self.required else self.default
        if not isinstance(default, str | int | float | bool | type(None)):
            default = repr(default)
        return {"name": self.name, "default": default, "required": self.required, "type": self.annotation,
                "help": self.help}

    def __str__(self) -> str:
        return f"{self.name} (required)" if self.required else f"{self.name}={self.default!r}"


@dataclass(frozen=True)
class FactoryOptions:
    """A factory's options; `open` is True when it also takes `**kwargs` (any option then passes)."""

    options: tuple[PluginOption, ...]
    open: bool

    def names(self) -> list[str]:
        return [o.name for o in self.options]

    def unknown(self, given: dict) -> list[str]:
        """Names in `given` the factory does not take (none when it takes `**kwargs`)."""
        return [] if self.open else sorted(set(given) - set(self.names()))

    def missing(self, given: dict) -> list[str]:
        """Required options absent from `given`."""
        return [o.name for o in self.options if o.required and o.name not in given]

    def describe(self) -> str:
        """"a=1, b=True" or "none"."""
        return ", ".join(map(str, self.options)) + (", **options" if self.open else "") or "none"


def factory_options(kind: str, factory) -> FactoryOptions:
    """The options of a `kind` factory (a factory whose signature Python cannot read, such as some builtins,
    is taken to accept any option).

    Raises:
        TypeError: the factory cannot take the kind's positional arguments.
    """
    try:
        signature = inspect.signature(factory)
    except ValueError:
        return FactoryOptions((), open=True)
    params = list(signature.parameters.values())
    positional = POSITIONAL[kind]
    takes = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
    if len(takes) < len(positional) and not varargs:
        raise TypeError(f"a {kind} factory takes {', '.join(positional) or 'no'} positional argument(s) "
                        f"first; {getattr(factory, '__qualname__', factory)}{signature} does not")
    helps = docstring_args(factory)
    options = tuple(
        PluginOption(p.name, p.default, _annotation(p.annotation), helps.get(p.name, ""))
        for p in takes[len(positional):] + [p for p in params if p.kind is p.KEYWORD_ONLY]
    )
    return FactoryOptions(options, any(p.kind is p.VAR_KEYWORD for p in params))


def _annotation(annotation) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))


_ARG = re.compile(r"^(\s*)([A-Za-z_][\w, ]*?)(?:\s*\([^)]*\))?:\s*(.*)$")


def docstring_args(factory) -> dict[str, str]:
    """`{name: help}` from the `Args:` section of the factory's docstring (a class: its docstring, then its
    `__init__`'s), Google style; "a, b: text" documents both names."""
    docs = [inspect.getdoc(factory) or ""]
    if inspect.isclass(factory):
        docs.append(inspect.getdoc(factory.__init__) or "")
    out: dict[str, str] = {}
    for doc in docs:
        for name, text in _args_section(doc).items():
            out.setdefault(name, text)
    return out


def _args_section(doc: str) -> dict[str, str]:
    lines = doc.splitlines()
    stripped = [line.strip() for line in lines]
    if "Args:" not in stripped:
        return {}
    out: dict[str, str] = {}
    names: list[str] = []
    indent = None
    for line in lines[stripped.index("Args:") + 1:]:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        indent = depth if indent is None else indent
        match = _ARG.match(line)
        if depth < indent or (depth == indent and not match):
            break
        if depth == indent:
            names = [n.strip() for n in match.group(2).split(",")]
            out.update(dict.fromkeys(names, match.group(3).strip()))
        else:
            for n in names:
                out[n] = f"{out[n]} {line.strip()}"
    return out
