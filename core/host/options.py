"""A plugin's options, read from its factory: the keyword parameters after the kind's positional ones,
with their defaults and the help its docstring's `Args:` section gives them; and values given as text (the
command line's `--loader-option KEY=VALUE`) converted by each option's annotation."""

import inspect
import json
import re
from dataclasses import dataclass
from typing import Any

POSITIONAL = {"source": ("root",), "loader": ("meta", "decoder", "config"), "decoder": (), "scheduler": ()}
"""What each kind's factory receives positionally (see `dl.contracts.hookspecs`); everything else is an option."""

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

    def convert(self, text: str):
        """`text` (a command-line value) as this option's type: by its annotation (`int`, `float`, `bool`, `str`,
        `dict` / `list` as JSON, unions such as `int | str` or `str | None`, tried from the most specific: None,
        bool, int, float, JSON, str), else by its default's type, else JSON where it parses and the text where not.

        Raises:
            ValueError: no type of the annotation reads `text`; the message says what it takes.
        """
        types = annotation_types(self.annotation)
        if not types and not self.required and self.default is not None:
            types = [type(self.default).__name__]
        if not types:
            try:
                return json.loads(text)
            except ValueError:
                return text
        for name in sorted(types, key=lambda n: CONVERSION_ORDER.index(n) if n in CONVERSION_ORDER else 99):
            try:
                return CONVERTERS.get(name, str)(text)
            except ValueError:
                continue
        raise ValueError(f"option {self.name} takes {self.annotation or ' | '.join(types)}, got {text!r}")


def annotation_types(annotation: str) -> list[str]:
    """The type names of an annotation as written: "int | None" -> ["int", "None"], "Optional[str]" ->
    ["str", "None"], "typing.Union[int, str]" -> ["int", "str"]; [] when there is none."""
    text = annotation.replace("typing.", "").replace(" ", "")
    if not text:
        return []
    optional = re.fullmatch(r"Optional\[(.*)\]", text)
    union = re.fullmatch(r"Union\[(.*)\]", text)
    if optional:
        text = optional.group(1) + "|None"
    elif union:
        text = union.group(1).replace(",", "|")
    return [re.sub(r"\[.*", "", part) or part for part in text.split("|")]


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
        if not isinstance(value, kind):
            raise ValueError(text)
        return value
    return read


CONVERTERS = {"None": _none, "NoneType": _none, "bool": _bool, "int": int, "float": float, "str": str,
              "dict": _json(dict), "list": _json(list), "tuple": lambda text: tuple(_json(list)(text))}
CONVERSION_ORDER = ("None", "NoneType", "bool", "int", "float", "dict", "list", "tuple", "str")


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
