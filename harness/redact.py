"""Secrets never reach evidence, reports or logs: masking for argument lists, JSON-like data and
configuration text. One place decides what looks like a secret (a name containing api key, token,
password, passphrase, secret or credential); names that only say where a secret is kept
(``passphrase_env``, ``api_key_file``) are not secrets and stay readable. Stdlib only.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

__all__ = ["MASK", "is_secret_name", "mask_values", "normalise_name", "redact_argv", "redact_command_line",
           "redact_config_text", "redact_data"]

MASK = "***"

# The documented rule (docs/ARCHITECTURE.md, "Secrets"). A name is normalised first: quotes and
# leading dashes dropped, lower case, '-' read as '_' (so ``--api-key``, ``"DB_PASSWORD"``,
# ``hf-token`` are all seen the same way). It is a secret when it is one of SECRET_NAMES or ends
# with one of SECRET_SUFFIXES (``HF_TOKEN``, ``DB_PASSWORD``, ``AWS_SECRET``, ``OPENAI_API_KEY``),
# unless it only says where a secret is kept (POINTER_SUFFIXES: ``passphrase_env``,
# ``api_key_file``) or is a per-token quantity. So ``--prefill-tokens-per-s`` or ``max_tokens`` are not secrets.
SECRET_NAMES = frozenset({
    "api_key", "apikey", "token", "password", "passwd", "passphrase", "secret", "credential",
    "credentials", "auth", "authorization", "private_key", "access_key", "secret_key",
})
SECRET_SUFFIXES = ("_token", "_password", "_passwd", "_passphrase", "_secret", "_key", "_apikey",
                   "_credential", "_credentials")
POINTER_SUFFIXES = ("_env", "_file", "_path", "_dir")
# Quantities named after tokens are not secrets: ``kv_bytes_per_token``, ``max_num_batched_tokens``.
NOT_SECRET_SUFFIXES = ("_per_token",)

_SECRET = re.compile(r"(api[-_]?key|token|password|passwd|passphrase|secret|credential)", re.IGNORECASE)

# `passphrase: x`, `api_key: "x"`, `{hf_token: x}` in YAML text; not `passphrase_env:`.
_SECRET_VALUE = re.compile(
    r"""(\b\w*(?:api[-_]?key|token|password|passwd|passphrase|secret|credential)\s*:[ \t]*)"""
    r"""("[^"\n]*"|'[^'\n]*'|[^,}\n#]*[^,}\n#\s])""",
    re.IGNORECASE)


def normalise_name(name: str) -> str:
    return name.strip().strip("'\"").lstrip("-").lower().replace("-", "_")


def is_secret_name(name: str) -> bool:
    """True for a key, flag or variable name whose value is a secret (``HF_TOKEN``, ``api_key``,
    ``--api-key``, ``"DB_PASSWORD"``); False for pointers (``passphrase_env``) and for names that
    merely contain a secret-like word (``--prefill-tokens-per-s``)."""
    n = normalise_name(name)
    if not n or n.endswith(POINTER_SUFFIXES) or n.endswith(NOT_SECRET_SUFFIXES):
        return False
    return n in SECRET_NAMES or n.endswith(SECRET_SUFFIXES)


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
        elif arg.startswith("-") and not sep and is_secret_name(arg):
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


def mask_values(text: str, secrets: Any) -> str:
    """``text`` with every occurrence of each known secret value replaced by the mask (for logs an
    engine wrote: vLLM echoes its arguments). Values shorter than 4 characters are not searched
    (they would mask ordinary words)."""
    for value in sorted({str(v) for v in secrets if v is not None and len(str(v)) >= 4}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text
