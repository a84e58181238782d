"""One parser for the quantities users write: "5 GB/s", "5GiB/s", "25%", "72h", "14 TB", "200 Gb/s".

Decimal (kB, MB, GB, TB, PB: powers of 1000) and binary (KiB, MiB, GiB, TiB, PiB: powers of 1024)
prefixes are kept exact; ``B`` is a byte and ``b`` a bit, so "200 Gb/s" (a link speed) and
"5 GB/s" (a storage bandwidth) never mix. A unit that is unknown, or ambiguous such as "KB" or
"gb", is an error that lists what is accepted.

Values are normalised to base units: bytes, bytes/s, bits/s, seconds, a fraction (25% -> 0.25),
a multiplier (12.6x -> 12.6), tokens/s, or a plain count.

Stdlib only: the node agent imports it.
"""

from __future__ import annotations

import decimal
import enum
import math
import re
from typing import NamedTuple, Union

__all__ = ["UnitKind", "Quantity", "parse_quantity", "format_quantity", "accepted_units", "UnitParseError"]


class UnitParseError(ValueError):
    """A quantity string that does not parse; the message lists the accepted units."""


class UnitKind(str, enum.Enum):
    BYTES = "bytes"
    BANDWIDTH = "bandwidth"  # bytes per second
    BITRATE = "bitrate"  # bits per second (network links)
    DURATION = "duration"  # seconds
    PERCENT = "percent"  # a fraction: 25% -> 0.25
    RATIO = "ratio"  # a multiplier: 12.6x -> 12.6
    TOKEN_RATE = "token_rate"  # tokens per second
    COUNT = "count"  # a plain number
    BOOL = "bool"


_DEC = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}

_BYTE_UNITS: dict[str, int] = {f"{p}B": m for p, m in _DEC.items()}
_BYTE_UNITS.update({f"{p}B": m for p, m in _BIN.items()})
_BANDWIDTH_UNITS: dict[str, int] = {f"{u}/s": m for u, m in _BYTE_UNITS.items()}
_BANDWIDTH_UNITS.update({f"{u}ps": m for u, m in _BYTE_UNITS.items() if u.endswith("B") and "i" not in u})
_BITRATE_UNITS: dict[str, int] = {}
for _p, _m in _DEC.items():
    _BITRATE_UNITS[f"{_p}b/s"] = _m
    _BITRATE_UNITS[f"{_p}bit/s"] = _m
    _BITRATE_UNITS[f"{_p}bps"] = _m
_DURATION_UNITS: dict[str, float] = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3,
    "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0,
}
_PERCENT_UNITS = {"%": 0.01}
_RATIO_UNITS = {"x": 1.0, "×": 1.0}
_TOKEN_RATE_UNITS = {"tok/s": 1.0, "tokens/s": 1.0}

_UNITS_BY_KIND: dict[UnitKind, dict[str, float]] = {
    UnitKind.BYTES: {k: float(v) for k, v in _BYTE_UNITS.items()},
    UnitKind.BANDWIDTH: {k: float(v) for k, v in _BANDWIDTH_UNITS.items()},
    UnitKind.BITRATE: {k: float(v) for k, v in _BITRATE_UNITS.items()},
    UnitKind.DURATION: _DURATION_UNITS,
    UnitKind.PERCENT: _PERCENT_UNITS,
    UnitKind.RATIO: _RATIO_UNITS,
    UnitKind.TOKEN_RATE: _TOKEN_RATE_UNITS,
}
# Exact integer multipliers, so 14 TB and 5 GiB are exact in bytes.
_EXACT: dict[str, int] = {**_BYTE_UNITS, **_BANDWIDTH_UNITS, **_BITRATE_UNITS}

# A bare number is accepted where its meaning is unambiguous.
_BARE_OK = {UnitKind.BYTES, UnitKind.BANDWIDTH, UnitKind.BITRATE, UnitKind.DURATION,
            UnitKind.COUNT, UnitKind.RATIO, UnitKind.TOKEN_RATE}

_NUMBER = r"[-+]?(?:\d+(?:_\d+)*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_RE = re.compile(rf"^\s*(?P<num>{_NUMBER})\s*(?P<unit>[^\d\s][^\s]*)?\s*$")

_AMBIGUOUS_HINTS = {
    "KB": "write kB (1000 B) or KiB (1024 B)",
    "K": "write kB (1000 B) or KiB (1024 B)",
}


class Quantity(NamedTuple):
    """A parsed quantity: ``value`` in the base unit of ``kind``; ``text`` as the user wrote it."""

    value: float
    kind: UnitKind
    text: str

    def __str__(self) -> str:
        return self.text


def accepted_units(kind: UnitKind) -> list[str]:
    """The unit spellings accepted for ``kind``."""
    return sorted(_UNITS_BY_KIND.get(kind, {}), key=lambda u: (len(u), u))


def _kind_of_unit(unit: str) -> list[UnitKind]:
    return [k for k, table in _UNITS_BY_KIND.items() if unit in table]


def parse_quantity(text: Union[str, int, float, bool], kind: UnitKind | None = None) -> Quantity:
    """Parse ``text`` into a :class:`Quantity`.

    With ``kind`` given, the unit must belong to it (a bare number is accepted where its meaning
    is clear: bytes, seconds, counts; never for percentages). Without ``kind``, the unit decides.
    """
    if isinstance(text, bool):
        if kind in (None, UnitKind.BOOL):
            return Quantity(1.0 if text else 0.0, UnitKind.BOOL, str(text).lower())
        raise UnitParseError(f"expected a {kind.value} quantity, got a boolean {text!r}")
    if isinstance(text, (int, float)):
        return _bare_number(text, kind)
    if not isinstance(text, str):
        raise UnitParseError(f"expected a quantity such as '5 GB/s', got {type(text).__name__}")
    if kind is UnitKind.BOOL:
        return _bool_word(text)
    m = _RE.match(text)
    if not m:
        raise UnitParseError(f"{text!r} is not a number with a unit (for example '5 GB/s', '25%', '72h')")
    num_text = m.group("num").replace("_", "")
    unit = m.group("unit") or ""
    if not unit:
        return parse_quantity(float(num_text) if any(c in num_text for c in ".eE") else int(num_text), kind)
    kind = _unit_kind(unit, text, kind)
    # Decimal arithmetic so "65.6 GB" is exactly 65_600_000_000 bytes, not 65599999999.99999.
    multiplier = _EXACT[unit] if unit in _EXACT else decimal.Decimal(repr(_UNITS_BY_KIND[kind][unit]))
    try:
        value = float(decimal.Decimal(num_text) * multiplier)
    except decimal.InvalidOperation:
        raise UnitParseError(f"{text!r} is not a number with a unit") from None
    if not math.isfinite(value):
        raise UnitParseError(f"{text!r} is not a finite number")
    return Quantity(value, kind, text.strip())


def _bare_number(value: Union[int, float], kind: UnitKind | None) -> Quantity:
    """A number with no unit: a count unless ``kind`` says otherwise, and only where its meaning is clear."""
    if kind is None:
        kind = UnitKind.COUNT
    if kind not in _BARE_OK:
        raise UnitParseError(
            f"{value!r} has no unit; a {kind.value} needs one of: {', '.join(accepted_units(kind))}"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise UnitParseError(f"{value!r} is not a finite number")
    return Quantity(float(value), kind, str(value))


def _bool_word(text: str) -> Quantity:
    low = text.strip().lower()
    if low in ("true", "yes", "on"):
        return Quantity(1.0, UnitKind.BOOL, text)
    if low in ("false", "no", "off"):
        return Quantity(0.0, UnitKind.BOOL, text)
    raise UnitParseError(f"expected true or false, got {text!r}")


def _unit_kind(unit: str, text: str, kind: UnitKind | None) -> UnitKind:
    """The kind ``unit`` belongs to; with ``kind`` given, it must be that one (the error names what
    the unit is and what is accepted)."""
    kinds = _kind_of_unit(unit)
    hint = _AMBIGUOUS_HINTS.get(unit.split("/")[0])
    if kind is not None:
        if unit not in _UNITS_BY_KIND.get(kind, {}):
            other = f" ({unit!r} is a {kinds[0].value} unit)" if kinds else ""
            accepted = ", ".join(accepted_units(kind)) or "a plain number"
            msg = f"unit {unit!r} in {text!r} is not a {kind.value} unit{other}; accepted: {accepted}"
            raise UnitParseError(msg + (f"; {hint}" if hint else ""))
        return kind
    if not kinds:
        byte_units = ", ".join(accepted_units(UnitKind.BYTES))
        duration_units = ", ".join(accepted_units(UnitKind.DURATION))
        msg = (
            f"unknown unit {unit!r} in {text!r}; accepted: bytes ({byte_units}), "
            f"bandwidth (e.g. GB/s, GiB/s), bit rate (e.g. Gb/s), duration ({duration_units}), "
            "percent (%), ratio (x), tokens/s (tok/s)"
        )
        raise UnitParseError(msg + (f"; {hint}" if hint else ""))
    # Duration 'm' (minutes) vs nothing else: every unit belongs to exactly one kind.
    return kinds[0]


def _scaled(value: float, steps: list[tuple[float, str]], digits: int) -> str:
    for factor, name in steps:
        if abs(value) >= factor:
            return f"{value / factor:.{digits}f} {name}"
    factor, name = steps[-1]
    return f"{value / factor:.{digits}f} {name}"


def format_quantity(value: float | None, kind: UnitKind | str, digits: int = 2) -> str:
    """Render a base-unit value for people: decimal prefixes for storage and bandwidth, as vendors
    and fio's ``bw_bytes`` report them (GB/s means 10**9 bytes per second)."""
    if value is None:
        return "-"
    kind = UnitKind(kind)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if kind is UnitKind.BYTES:
        return _scaled(value, [(1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1, "B")], digits)
    if kind is UnitKind.BANDWIDTH:
        return _scaled(value, [(1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1, "B/s")], digits)
    if kind is UnitKind.BITRATE:
        return _scaled(value, [(1e12, "Tb/s"), (1e9, "Gb/s"), (1e6, "Mb/s"), (1e3, "kb/s"), (1, "b/s")], digits)
    if kind is UnitKind.DURATION:
        if abs(value) >= 3600:
            return f"{value / 3600:.{digits}f} h"
        if abs(value) >= 60:
            return f"{value / 60:.{digits}f} min"
        if abs(value) >= 1:
            return f"{value:.{digits}f} s"
        return f"{value * 1e3:.{digits}f} ms"
    if kind is UnitKind.PERCENT:
        return f"{value * 100:.{digits}f}%"
    if kind is UnitKind.RATIO:
        return f"{value:.{digits}f}x"
    if kind is UnitKind.TOKEN_RATE:
        return f"{value:.{digits}f} tok/s"
    if kind is UnitKind.BOOL:
        return "yes" if value else "no"
    return f"{value:g}"
