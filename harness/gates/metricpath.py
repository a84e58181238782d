"""Resolve a metric path pattern (``nodes.*.storage.*.mounted``) against measured results.

A ``*`` segment matches every key at that level. A measurement dict (a mapping with a ``value``
or ``samples`` key) is a leaf: the walk stops there. A wildcard branch that lacks the rest of the
path yields nothing (for G1 that means "nothing was expected there"); a pattern that matches
nothing at all is reported by the caller as NOT RUN.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["is_measurement", "resolve"]


def is_measurement(node: Any) -> bool:
    """True when ``node`` is a leaf: a number, a bool, None, or a measurement dict."""
    if isinstance(node, Mapping):
        return "value" in node or "samples" in node
    return True


def resolve(measured: Mapping[str, Any], pattern: str) -> list[tuple[str, Any]]:
    """Every (concrete path, leaf) matching ``pattern``, in the measured dict's key order."""
    parts = pattern.split(".")
    out: list[tuple[str, Any]] = []

    def walk(node: Any, i: int, prefix: list[str]) -> None:
        if i == len(parts):
            if is_measurement(node):
                out.append((".".join(prefix), node))
            return
        if not isinstance(node, Mapping) or is_measurement(node):
            return
        seg = parts[i]
        if seg == "*":
            for key in node:
                walk(node[key], i + 1, prefix + [str(key)])
        elif seg in node:
            walk(node[seg], i + 1, prefix + [seg])

    walk(measured, 0, [])
    return out
