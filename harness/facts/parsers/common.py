"""Helpers shared by the parsers."""

from __future__ import annotations

import json
import re
from typing import Any

from harness.errors import KvgateError

NA = {"", "n/a", "na", "none", "null", "-", "unknown", "not supported"}


class FactsError(KvgateError):
    """Base of the facts errors: ``FactsParseError`` (a tool's output the parser does not know; the
    collector records it as an error fact) and ``harness.facts.collect.FactsUnsettled`` (a batched
    collection that never stops asking the node for more: an infrastructure fault, exit 4)."""


class FactsParseError(FactsError):
    """A tool's output is not in a format the parser knows; the message names the tool."""

    def __init__(self, tool: str, message: str) -> None:
        self.tool = tool
        super().__init__(f"{tool}: {message}")


def is_na(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in NA)


def load_json_after_noise(tool: str, text: str) -> Any:
    """Decode the JSON document in ``text``, skipping lines a tool prints before it (Python
    warnings, banners): the document starts at the first line beginning with '{' or '['."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("{", "[")):
            body = "".join(lines[i:])
            try:
                obj, _ = json.JSONDecoder().raw_decode(body.lstrip())
            except ValueError as exc:
                raise FactsParseError(tool, f"invalid JSON: {exc}") from None
            return obj
    raise FactsParseError(tool, "no JSON document in the output")


_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")
_MULT = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "kib": 2**10, "m": 2**20, "mb": 2**20, "mib": 2**20,
         "g": 2**30, "gb": 2**30, "gib": 2**30, "t": 2**40, "tb": 2**40, "tib": 2**40}


def binary_size(value: Any, default_unit: str = "") -> int | None:
    """A memory size from a vendor tool in bytes. GPU tools print 'MB' for MiB (amd-smi's 196592 MB
    is 192 GiB), so every prefix is binary here; only use this for device memory."""
    if is_na(value):
        return None
    if isinstance(value, dict):
        return binary_size(value.get("value"), str(value.get("unit") or default_unit))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value * _MULT.get(default_unit.lower(), 1))
    m = _SIZE.match(str(value))
    if not m:
        return None
    unit = (m.group(2) or default_unit).lower()
    if unit not in _MULT:
        return None
    return int(float(m.group(1)) * _MULT[unit])
