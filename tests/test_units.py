"""Byte sizes as written on the command line (dl.contracts.units)."""

import pytest

from dl.contracts.errors import DlError
from dl.contracts.units import format_bytes, parse_bytes


@pytest.mark.parametrize(("text", "expected"), [("0", 0), (512, 512), ("512M", 512_000_000), ("1.5G", 1_500_000_000),
                                                ("2GiB", 2 * 2**30), ("64kb", 64_000), (" 3 MiB ", 3 * 2**20),
                                                ("7b", 7)])
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["lots", "1X", "", "-5M", True, "1.2.3G"])
def test_parse_bytes_refuses_what_is_not_a_size(text):
    with pytest.raises(DlError, match="budget"):
        parse_bytes(text, "budget")


def test_format_bytes():
    assert [format_bytes(n) for n in (0, 999, 256_000_000, 1_500_000_000)] == ["0", "999", "256M", "1.5G"]


def test_remote_sources_take_sizes_with_units():
    from dl.plugins.remote.options import remote_options

    options = remote_options(True, "8G", 4, "1MiB", 6, 120.0)
    assert (options.cache_bytes, options.block_size) == (8_000_000_000, 2**20)
    with pytest.raises(DlError, match="source option cache_bytes"):
        remote_options(True, "lots", 4, 1024, 6, 120.0)
