"""Turning an argument list, an environment and a working directory into one command line for a
POSIX shell on a node, without ever pasting a user string into it unquoted."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from harness.errors import InputError

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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


def shell_line(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None) -> str:
    """One line for the node's login shell: ``cd -- '<cwd>' && env 'K=V' 'arg0' 'arg1' ...``.

    Every user string is a single quoted word (``shlex.quote``); the only unquoted text is ours.
    An ``argv[0]`` containing ``=`` would be read by ``env`` as an assignment, so it is refused
    whenever an environment is given.
    """
    args = check_argv(argv)
    prefix = env_prefix(env)
    if prefix and "=" in args[0]:
        raise InputError(f"program name may not contain '=' when an environment is set: {args[0]!r}")
    line = shlex.join([*prefix, *args])
    if cwd is not None:
        if "\0" in cwd or not cwd:
            raise InputError(f"invalid working directory {cwd!r}")
        line = f"cd -- {shlex.quote(cwd)} && {line}"
    return line
