"""Parsing helpers for command-line values: KEY=VALUE options, episode selections ("0,3-6,8"), windows
and comma-separated lists."""

import json

import click

from dl.errors import DlError


def parse_key_values(items: tuple[str, ...], option: str) -> dict:
    """("cache_size=8", "seek_mode=exact") -> {"cache_size": 8, "seek_mode": "exact"} (JSON values where
    they parse, else strings)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r}: write KEY=VALUE", param_hint=option)
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def parse_delta(items: tuple[str, ...]) -> dict[str, list[float]]:
    """("action=0,0.1,0.2",) -> {"action": [0.0, 0.1, 0.2]}."""
    out = {}
    for item in items:
        key, sep, offsets = item.partition("=")
        try:
            if not sep or not key:
                raise ValueError
            out[key] = [float(x) for x in offsets.split(",")]
        except ValueError:
            raise click.BadParameter(f"{item!r}: write KEY=OFFSETS in seconds, e.g. action=0,0.1,0.2",
                                     param_hint="--delta-timestamps") from None
    return out


def split_csv(values: tuple[str, ...], convert=str) -> list:
    """("single,sarm", "chunk") -> ["single", "sarm", "chunk"] (each item converted)."""
    return [convert(v.strip()) for value in values for v in value.split(",") if v.strip()]


def parse_episodes(text: str) -> list[int]:
    """Parse a comma-separated list of episode indices and inclusive ranges.

    "0,3-6,8" -> [0, 3, 4, 5, 6, 8]. Duplicates are dropped; order is ascending.

    Raises:
        DlError: on an empty item, a non-integer, a negative index, or a range whose end is before its start.
    """
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
