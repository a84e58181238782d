"""Checks on what becomes a command on a node: argument lists (never strings), environment names
that ``env NAME=value`` cannot misread. Executors quote every argument themselves (``shlex.join``)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from harness.errors import InputError

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


def check_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """``argv`` as a tuple of str; refuses a bare string (it would be split into characters)."""
    if isinstance(argv, (str, bytes)):
        raise InputError(f"a command must be an argument list, not a string: {argv!r}")
    out = tuple(argv)
    if not out:
        raise InputError("a command needs at least one argument")
    for arg in out:
        if not isinstance(arg, str):
            raise InputError(f"command arguments must be strings, got {type(arg).__name__}: {arg!r}")
        if "\0" in arg:
            raise InputError(f"command argument contains a NUL byte: {arg!r}")
    return out


def check_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """Environment names must be shell identifiers (so ``env NAME=value`` cannot be misread)."""
    out: dict[str, str] = {}
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise InputError(f"invalid environment variable name {key!r}: expected [A-Za-z_][A-Za-z0-9_]*")
        if not isinstance(value, str) or "\0" in value:
            raise InputError(f"environment variable {key} must be a string without NUL bytes")
        out[key] = value
    return out


def env_prefix(env: Mapping[str, str] | None) -> list[str]:
    """``["env", "K=V", ...]`` (argument-list form), or ``[]`` when there is nothing to set."""
    checked = check_env(env)
    if not checked:
        return []
    return ["env", *(f"{k}={v}" for k, v in checked.items())]
