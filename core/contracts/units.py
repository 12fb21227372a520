"""Byte sizes as users write them on the command line and in options: `512M`, `1.5G`, `2GiB`, `0`."""

import re

from .errors import DlError

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12,
          "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(value: int | float | str, what: str = "size") -> int:
    """Bytes from an integer or a string with a decimal (K, M, G, T: powers of 1000) or binary (KiB, MiB, GiB,
    TiB) unit, case-insensitive: 512M -> 512000000, 1GiB -> 1073741824.

    Args:
        value: the size.
        what: names the option in the error message.

    Raises:
        DlError: not a size, or negative.
    """
    if isinstance(value, bool):
        raise DlError(f"{what}: expected a size in bytes such as 512M or 2G, got {value!r}.")
    if isinstance(value, int | float):
        number, unit = float(value), ""
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(value))
        if not match or match.group(2).lower() not in _UNITS:
            raise DlError(f"{what}: expected a size in bytes such as 512M, 2G or 1GiB, got {value!r}.")
        number, unit = float(match.group(1)), match.group(2).lower()
    if number < 0:
        raise DlError(f"{what}: a size cannot be negative, got {value!r}.")
    return int(number * _UNITS[unit])


def format_bytes(n: int) -> str:
    """A short decimal rendering: 512000000 -> "512M", 1500000000 -> "1.5G", 0 -> "0"."""
    for unit, size in (("T", 10**12), ("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)
