"""harness.units: one parser for every quantity users write."""

import math

import pytest

from harness.units import UnitKind, UnitParseError, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("5 GB/s", UnitKind.BANDWIDTH, 5_000_000_000),
        ("5GB/s", UnitKind.BANDWIDTH, 5_000_000_000),
        ("5 GiB/s", UnitKind.BANDWIDTH, 5 * 2**30),
        ("5.23 GB/s", UnitKind.BANDWIDTH, 5.23e9),
        ("25%", UnitKind.PERCENT, 0.25),
        ("0.1%", UnitKind.PERCENT, 0.001),
        ("72h", UnitKind.DURATION, 72 * 3600),
        ("10m", UnitKind.DURATION, 600),
        ("250 ms", UnitKind.DURATION, 0.25),
        ("14 TB", UnitKind.BYTES, 14 * 10**12),
        ("192 GB", UnitKind.BYTES, 192 * 10**9),
        ("65.6 GB", UnitKind.BYTES, 65.6e9),
        ("64 MiB", UnitKind.BYTES, 64 * 2**20),
        ("200 Gb/s", UnitKind.BITRATE, 200 * 10**9),
        ("12.6x", UnitKind.RATIO, 12.6),
        ("74.9 tok/s", UnitKind.TOKEN_RATE, 74.9),
    ],
)
def test_parses_to_base_units(text: str, kind: UnitKind, value: float) -> None:
    q = parse_quantity(text, kind)
    assert q.kind is kind
    assert math.isclose(q.value, value, rel_tol=1e-12)
    # the unit alone decides the kind when none is asked for
    assert parse_quantity(text).kind is kind


def test_binary_and_decimal_prefixes_stay_exact() -> None:
    assert parse_quantity("14 TB").value == 14_000_000_000_000
    assert parse_quantity("1 TiB").value == 1_099_511_627_776
    assert parse_quantity("5 GiB/s").value != parse_quantity("5 GB/s").value


@pytest.mark.parametrize("text", ["5 KB", "12 gb", "5 zz/s", "3 parsecs"])
def test_unknown_or_ambiguous_unit_lists_accepted(text: str) -> None:
    with pytest.raises(UnitParseError, match="accepted"):
        parse_quantity(text)


def test_ambiguous_kb_explains_choice() -> None:
    with pytest.raises(UnitParseError, match="kB .* or KiB"):
        parse_quantity("5 KB")


def test_bits_are_not_bytes() -> None:
    with pytest.raises(UnitParseError, match="bitrate"):
        parse_quantity("5 Gb/s", UnitKind.BANDWIDTH)


def test_percent_needs_its_unit() -> None:
    with pytest.raises(UnitParseError, match="no unit"):
        parse_quantity("25", UnitKind.PERCENT)


def test_bare_numbers_where_clear() -> None:
    assert parse_quantity(4096, UnitKind.BYTES).value == 4096
    assert parse_quantity("30", UnitKind.DURATION).value == 30


@pytest.mark.parametrize("bad", ["", "GB/s", "five GB/s", "1e999 GB"])
def test_garbage_is_an_error(bad: str) -> None:
    with pytest.raises(UnitParseError):
        parse_quantity(bad, UnitKind.BYTES)


def test_format_uses_decimal_units() -> None:
    assert format_quantity(5.23e9, UnitKind.BANDWIDTH) == "5.23 GB/s"
    assert format_quantity(0.265, UnitKind.PERCENT, 1) == "26.5%"
    assert format_quantity(72 * 3600, UnitKind.DURATION, 0) == "72 h"
    assert format_quantity(None, UnitKind.BYTES) == "-"
