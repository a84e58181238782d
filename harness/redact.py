"""Secrets never reach evidence, reports or logs: masking for argument lists, JSON-like data and
configuration text. One place decides what looks like a secret (a name containing api key, token,
password, passphrase, secret or credential); names that only say where a secret is kept
(``passphrase_env``, ``api_key_file``) are not secrets and stay readable. Stdlib only.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

__all__ = ["MASK", "is_secret_name", "redact_argv", "redact_command_line", "redact_config_text", "redact_data"]

MASK = "***"

_SECRET = re.compile(r"(api[-_]?key|token|password|passwd|passphrase|secret|credential)", re.IGNORECASE)
_POINTER = re.compile(r"(_env|_file|_path)$", re.IGNORECASE)

# `passphrase: x`, `api_key: "x"`, `{hf_token: x}` in YAML text; not `passphrase_env:`.
_SECRET_VALUE = re.compile(
    r"""(\b\w*(?:api[-_]?key|token|password|passwd|passphrase|secret|credential)\s*:[ \t]*)"""
    r"""("[^"\n]*"|'[^'\n]*'|[^,}\n#]*[^,}\n#\s])""",
    re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """True for a key or variable name whose value is a secret (``HF_TOKEN``, ``api_key``)."""
    return bool(_SECRET.search(name)) and not _POINTER.search(name)


def redact_argv(argv: Any) -> list[str]:
    """argv with secret values masked: the value after ``--api-key``-like flags, and the value of
    ``--api-key=...`` / ``HF_TOKEN=...`` arguments. Commands are evidence; secrets never are."""
    out: list[str] = []
    hide_next = False
    for raw in argv:
        arg = str(raw)
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        name, sep, _ = arg.partition("=")
        if sep and is_secret_name(name):
            out.append(f"{name}={MASK}")
        elif arg.startswith("-") and is_secret_name(arg):
            out.append(arg)
            hide_next = True
        else:
            out.append(arg)
    return out


def redact_data(data: Any) -> Any:
    """A copy of JSON-like ``data`` with the values of secret-named keys masked, and argument
    lists (``argv``, ``command``) passed through :func:`redact_argv`."""
    if isinstance(data, dict):
        out: dict[Any, Any] = {}
        for key, value in data.items():
            if isinstance(key, str) and is_secret_name(key) and isinstance(value, (str, int, float)):
                out[key] = MASK
            elif isinstance(key, str) and key in ("argv", "command") and isinstance(value, (list, tuple)):
                out[key] = redact_argv(value)
            elif key == "command_line" and isinstance(value, str):
                out[key] = redact_command_line(value)
            else:
                out[key] = redact_data(value)
        return out
    if isinstance(data, (list, tuple)):
        return [redact_data(v) for v in data]
    return data


def redact_command_line(line: str) -> str:
    """A shell command line with its secret arguments masked (unparseable lines are masked whole
    when they mention a secret name)."""
    try:
        return shlex.join(redact_argv(shlex.split(line)))
    except ValueError:
        return MASK if _SECRET.search(line) else line


def redact_config_text(text: str) -> str:
    """YAML text with the values of secret-looking keys replaced by ``'***'``."""
    return _SECRET_VALUE.sub(lambda m: f"{m.group(1)}'{MASK}'", text)
