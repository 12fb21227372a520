"""Parsing helpers for command-line values: KEY=VALUE options and comma-separated lists."""

import json

import click


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
