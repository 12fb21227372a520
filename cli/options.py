"""Parsing helpers for command-line values: KEY=VALUE options, episode selections ("0,3-6,8"), windows
and comma-separated lists."""

import json
import math
import os
from pathlib import Path

import click

from dl.contracts.errors import DlError


def parse_key_values(items: tuple[str, ...], option: str, guess: bool = True) -> dict:
    """("mem=8G", "nodes=2") -> {"mem": "8G", "nodes": 2}: with `guess`, JSON values where they parse, else the
    text (for values nothing types: storage options, resources); without, every value as text.

    Raises:
        click.BadParameter: an item that is not KEY=VALUE.
    """
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r}: write KEY=VALUE", param_hint=option)
        out[key] = value
        if guess:
            try:
                out[key] = json.loads(value)
            except ValueError:
                pass
    return out


def plugin_options(kind: str, name: str, items: tuple[str, ...], option: str) -> dict:
    """`--KIND-option KEY=VALUE` items as the named plugin's options, each value converted by its factory's
    annotation (`dl.host.registry.Registry.parse_options`: `revision=2024` stays text for a `str` option).
    For `--decoder auto` the values stay text (options then belong to no one decoder; the check refuses them).

    Raises:
        click.BadParameter: an item that is not KEY=VALUE. PluginError: unknown plugin or option, or a value
            its option's type cannot read.
    """
    texts = parse_key_values(items, option, guess=False)
    if not texts or name == "auto":
        return texts
    from dl.host.manager import get_plugins

    return get_plugins().registry.parse_options(kind, name, texts, option)


def parse_delta(items: tuple[str, ...]) -> dict[str, list[float]]:
    """("action=0,0.1,0.2",) -> {"action": [0.0, 0.1, 0.2]}.

    Raises:
        click.BadParameter: an item that is not KEY=OFFSETS, or an offset that is not a finite number.
    """
    out = {}
    for item in items:
        key, sep, offsets = item.partition("=")
        try:
            if not sep or not key:
                raise ValueError
            out[key] = [float(x) for x in offsets.split(",")]
            if not all(math.isfinite(x) for x in out[key]):
                raise ValueError
        except ValueError:
            raise click.BadParameter(f"{item!r}: write KEY=OFFSETS, finite numbers of seconds, e.g. "
                                     "action=0,0.1,0.2", param_hint="--delta-timestamps") from None
    return out


def split_csv(values: tuple[str, ...], convert=str) -> list:
    """("single,sarm", "chunk") -> ["single", "sarm", "chunk"] (each item converted)."""
    return [convert(v.strip()) for value in values for v in value.split(",") if v.strip()]


def parse_episodes(text: str) -> list[int]:
    """Parse a comma-separated list of episode indices and inclusive ranges.

    "0,3-6,8" -> [0, 3, 4, 5, 6, 8]. Duplicates are dropped; order is ascending.

    Raises:
        DlError: an empty selection (''), an empty item, a non-integer, a negative index, or a range whose end is
            before its start.
    """
    if not text.strip():
        raise DlError(f"--episodes {text!r} is empty; give indices and inclusive ranges such as '0,3-6,8', or leave "
                      "the option out to select every episode.")
    out: set[int] = set()
    for item in text.split(","):
        item = item.strip()
        try:
            if "-" in item:
                a, b = (int(x) for x in item.split("-", 1))
                if b < a:
                    raise DlError(f"--episodes: the range {item!r} ends before it starts; write {b}-{a}.")
                out.update(range(a, b + 1))
            else:
                out.add(int(item))
        except ValueError:
            raise DlError(
                f"--episodes: cannot read {item!r} in {text!r}; write indices and inclusive ranges such as "
                "'0,3-6,8'."
            ) from None
    if any(i < 0 for i in out):
        raise DlError(f"--episodes: episode indices are >= 0, got {text!r}.")
    return sorted(out)


class PluginOption(click.Option):
    """`--source` / `--loader` / `--decoder` / `--scheduler`: a plugin name whose help lists the registered
    names of its kind, loaded only when help is shown (so `dl --help` stays fast)."""

    def __init__(self, *args, kind: str, default_name: str, also: str = "", **kwargs):
        self.kind, self.default_name, self.also = kind, default_name, also
        super().__init__(*args, **kwargs)

    def get_help_record(self, ctx):
        from dl.host.manager import get_plugins

        names = get_plugins().registry.names(self.kind)
        self.help = (f"{self.kind.capitalize()} plugin: {', '.join(names) or 'none installed'}{self.also} "
                     f"[{self.default_name}]; `dl plugins` shows their options.")
        return super().get_help_record(ctx)


def parse_workers(values: tuple[str, ...], default: int) -> list[int]:
    """("0,2", "4") -> [0, 2, 4]; each a DataLoader worker count >= 0.

    Raises:
        click.BadParameter: not an integer, or negative.
    """
    try:
        counts = split_csv(values, int) or [default]
    except ValueError:
        raise click.BadParameter(f"{', '.join(values)}: give integers >= 0, e.g. 0,2",
                                 param_hint="--num-workers") from None
    if any(n < 0 for n in counts):
        raise click.BadParameter(f"{min(counts)} is negative: give 0 (read in the benchmark process) or more "
                                 "workers", param_hint="--num-workers")
    return counts


def writable_folder(path: str, create: bool = False) -> Path:
    """Check that `path` is, or can be made, a folder files can be written into; with `create`, make it.
    Without `create` nothing is written, so a bad --out-dir is reported before any work and leaves no trace.

    Raises:
        click.BadParameter: it is a file, lies under a file, or cannot be written.
    """
    folder = Path(path)
    existing = next(p for p in [folder, *folder.absolute().parents] if p.exists())
    if not existing.is_dir():
        where = "is a file" if existing == folder else f"lies under the file {existing}"
        raise click.BadParameter(f"{path} {where}; give a folder", param_hint="--out-dir")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise click.BadParameter(f"{path} is not writable (by {existing}); give a folder you can write to",
                                 param_hint="--out-dir")
    if create:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise click.BadParameter(f"{path} cannot be created ({exc.strerror}); give a folder you can write to",
                                     param_hint="--out-dir") from None
    return folder
