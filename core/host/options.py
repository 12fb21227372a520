"""A plugin's options, read from its factory: the keyword parameters after the kind's positional ones, with their
defaults, their types (`typing.get_type_hints` of the signature) and the help its docstring's `Args:` section gives
them; and values given as text (the command line's `--loader-option KEY=VALUE`) converted by each option's type."""

import inspect
import json
import re
import types
import typing
from dataclasses import dataclass
from typing import Any

POSITIONAL = {"source": ("root",), "loader": ("meta", "decoder", "config"), "decoder": (), "scheduler": ()}
"""What each kind's factory receives positionally (see `dl.contracts.hookspecs`); everything else is an option."""

REQUIRED = inspect.Parameter.empty


def _none(text: str) -> None:
    if text.lower() not in ("none", "null"):
        raise ValueError(text)


def _bool(text: str) -> bool:
    words = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}
    if text.lower() not in words:
        raise ValueError(text)
    return words[text.lower()]


def _json(kind: type):
    def read(text: str):
        value = json.loads(text)
        if not isinstance(value, list if kind is tuple else kind):
            raise ValueError(text)
        return tuple(value) if kind is tuple else value
    return read


def _json_or_text(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


CONVERTERS = {type(None): _none, bool: _bool, int: int, float: float, dict: _json(dict), list: _json(list),
              tuple: _json(tuple), str: str, Any: _json_or_text, object: _json_or_text}
"""How a command-line value is read as each type an option may have, in the order a union is tried (the most
specific first: None, bool, int, float, JSON, text)."""


def option_types(annotation) -> tuple:
    """The types an option's resolved annotation allows, each a key of `CONVERTERS`: `int | None` -> (int,
    NoneType), `Optional[str]` -> (str, NoneType), `dict[str, str]` -> (dict,), `Literal["a", "b"]` -> (str,);
    () without an annotation.

    Raises:
        TypeError: a type no command-line value can give (a class, a callable), naming it.
    """
    if annotation is inspect.Parameter.empty:
        return ()
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return tuple(t for arg in typing.get_args(annotation) for t in option_types(arg))
    if origin is typing.Literal:
        return tuple(dict.fromkeys(type(v) for v in typing.get_args(annotation)))
    plain = origin or annotation
    if plain is None:
        plain = type(None)
    if plain not in CONVERTERS:
        raise TypeError(f"type {type_name(annotation)}, which no command-line value gives (use int, float, bool, "
                        "str, dict, list, tuple, Literal or a union of them)")
    return (plain,)


def type_name(annotation) -> str:
    """An annotation as people write it: `int | None`, `dict[str, str]`, `str`; "" for none."""
    if annotation is inspect.Parameter.empty:
        return ""
    if annotation is None or annotation is type(None):
        return "None"
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in typing.get_args(annotation))
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


@dataclass(frozen=True)
class PluginOption:
    """One option a factory takes: `name`, `default` (`REQUIRED` when it has none), `annotation` (the resolved
    type, `inspect.Parameter.empty` when it has none) and `help` from the factory's docstring."""

    name: str
    default: Any
    annotation: Any
    help: str

    def __post_init__(self):
        option_types(self.annotation)  # a type no command-line value gives fails here, when the plugin registers

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def type_name(self) -> str:
        return type_name(self.annotation)

    def to_dict(self) -> dict:
        """JSON-able form for `dl plugins --json` (a default that is not JSON-able is shown as its repr)."""
        default = None if self.required else self.default
        if not isinstance(default, str | int | float | bool | type(None)):
            default = repr(default)
        return {"name": self.name, "default": default, "required": self.required, "type": self.type_name,
                "help": self.help}

    def __str__(self) -> str:
        return f"{self.name} (required)" if self.required else f"{self.name}={self.default!r}"

    def convert(self, text: str):
        """`text` (a command-line value) as this option's type: each type of its annotation tried in `CONVERTERS`'
        order; without an annotation by its default's type, else JSON where it parses and the text where not.

        Raises:
            ValueError: no type of the annotation reads `text`; the message says what it takes.
        """
        allowed = option_types(self.annotation)
        if not allowed and not self.required and self.default is not None and type(self.default) in CONVERTERS:
            allowed = (type(self.default),)
        if not allowed:
            return _json_or_text(text)
        order = list(CONVERTERS)
        for kind in sorted(allowed, key=order.index):
            try:
                return CONVERTERS[kind](text)
            except ValueError:
                continue
        raise ValueError(f"option {self.name} takes {self.type_name or type(self.default).__name__}, got {text!r}")


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

    def convert(self, given: dict) -> dict:
        """`given` with each text value converted by its option's type (`PluginOption.convert`); values that are
        not text (from a library call or a scenario preset) and options the factory does not declare pass as they
        are (`unknown` reports the latter).

        Raises:
            ValueError: a value its option's type cannot read, naming the option and what it takes.
        """
        by_name = {o.name: o for o in self.options}
        return {key: by_name[key].convert(value) if isinstance(value, str) and key in by_name else value
                for key, value in given.items()}

    def describe(self) -> str:
        """"a=1, b=True" or "none"."""
        return ", ".join(map(str, self.options)) + (", **options" if self.open else "") or "none"


def factory_options(kind: str, factory) -> FactoryOptions:
    """The options of a `kind` factory (a factory whose signature Python cannot read, such as some builtins,
    is taken to accept any option).

    Raises:
        TypeError: the factory cannot take the kind's positional arguments, or an option's annotation names no type
            or a type no command-line value gives; the message names the option.
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
    namespace = getattr(factory.__init__ if inspect.isclass(factory) else factory, "__globals__", {})
    options = []
    for p in takes[len(positional):] + [p for p in params if p.kind is p.KEYWORD_ONLY]:
        try:
            options.append(PluginOption(p.name, p.default, _resolved(p.annotation, namespace), helps.get(p.name, "")))
        except TypeError as exc:
            raise TypeError(f"option {p.name} has {exc}") from None
    return FactoryOptions(tuple(options), any(p.kind is p.VAR_KEYWORD for p in params))


def _resolved(annotation, namespace: dict):
    """An annotation as a type: one written as a string (`from __future__ import annotations`) evaluated in the
    factory's module, as `typing.get_type_hints` does.

    Raises:
        TypeError: a string that names no type there (a typo, or a name not imported).
    """
    if not isinstance(annotation, str):
        return annotation
    try:
        return eval(annotation, dict(namespace))  # noqa: S307 - the plugin's own annotation, in its own module
    except Exception as exc:  # noqa: BLE001 - any failure means the annotation names no type
        raise TypeError(f"an annotation {annotation!r} that names no type ({exc})") from None


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
