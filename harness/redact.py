"""Secrets never reach evidence, reports or logs: masking for argument lists, JSON-like data and
configuration text. One place decides what looks like a secret (a name containing api key, token,
password, passphrase, secret or credential); names that only say where a secret is kept
(``passphrase_env``, ``api_key_file``) are not secrets and stay readable. Stdlib only.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

__all__ = ["MASK", "is_secret_flag", "is_secret_name", "mask_command_text", "mask_values", "normalise_name",
           "redact_argv", "redact_command_line", "redact_config_text", "redact_data", "scrub_text"]

MASK = "***"

# The documented rule (docs/ARCHITECTURE.md, "Secrets"). A name is normalised first: camelCase split
# into words (``hfToken`` -> ``hf_token``), quotes and leading dashes dropped, lower case, '-' and
# '.' read as '_' (so ``--api-key``, ``"DB_PASSWORD"``, ``--hfToken`` are all seen the same way).
# It is a secret when
# * it is one of SECRET_NAMES or ends with one of SECRET_SUFFIXES (``AccountKey``, ``remote_auth``);
# * it contains a password-like word anywhere (``PGPASSWORD``, ``sslpassword``, ``db_secret_x``);
# * its last word contains ``token`` (``HF_TOKEN``, ``authtoken``), but is not a count of tokens;
# unless it only says where a secret is kept (POINTER_SUFFIXES: ``passphrase_env``,
# ``api_key_file``) or is a per-token quantity. Token words elsewhere in a name are measurements
# (``first_token_ns``, ``token_ids``, ``kv_bytes_per_token``): masking them would corrupt evidence.
SECRET_NAMES = frozenset({
    "api_key", "apikey", "token", "password", "passwd", "passphrase", "secret", "credential",
    "credentials", "auth", "authorization", "private_key", "access_key", "secret_key", "pwd",
    "connection_string", "conn_str", "connstr", "sas", "sig", "shared_access_signature",
    "proxy_authorization", "cookie", "set_cookie",
})
SECRET_SUFFIXES = ("_token", "_password", "_passwd", "_passphrase", "_secret", "_key", "_apikey",
                   "_credential", "_credentials", "_auth", "_pwd", "_signature", "_connection_string",
                   "_conn_str", "_sas")
SECRET_WORDS = ("password", "passwd", "passphrase", "secret", "credential", "apikey")
POINTER_SUFFIXES = ("_env", "_file", "_path", "_dir")
# Quantities named after tokens are not secrets: ``kv_bytes_per_token``, ``max_num_batched_tokens``.
NOT_SECRET_SUFFIXES = ("_per_token",)
_TOKEN_QUANTITY = re.compile(r"tokens|tokeniz")

# Short flags whose value is a secret in the command lines people write in configuration files
# (``-k KEY``: an API key). Only there: in the commands kvgate itself runs, ``-k`` is something
# else (``journalctl -k``), and masking its argument would corrupt the evidence.
SECRET_SHORT_FLAGS = frozenset({"-k"})

_SECRET = re.compile(r"(api[-_]?key|token|password|passwd|passphrase|secret|credential|auth)", re.IGNORECASE)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

# A YAML line ``key: value`` (also ``- key: value``, ``{key: value``); the key decides.
_YAML_PAIR = re.compile(
    r"""^(?P<head>[ \t]*(?:-[ \t]+)*\{?[ \t]*(?P<key>"[^"\n]*"|'[^'\n]*'|[\w.-]+)[ \t]*:[ \t]*)"""
    r"""(?P<value>"[^"\n]*"|'[^'\n]*'|[^,}\n#]*[^,}\n#\s])""",
    re.MULTILINE)
# scheme://user:PASSWORD@host: the password goes, the user stays.
_URL_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:?#'\"]*:)(?P<pw>[^\s/@'\"]+)(?=@)")
# ?password=x, &sslpassword=x, ;AccountKey=x, `host=h sslpassword=x` (query and connection strings).
_PARAM = re.compile(r"(?P<head>(?:^|[?&;\s])[ \t]*(?P<key>[A-Za-z_][\w.-]*)[ \t]*=)(?P<value>[^&;\s'\"]*)")
# "Authorization": "Bearer x" (JSON) and Authorization: Bearer x (a header line).
_JSON_PAIR = re.compile(r"""(?P<head>["'](?P<key>[\w.-]+)["'][ \t]*:[ \t]*)(?P<value>"(?:[^"\\]|\\.)*"|'[^']*')""")
_HEADER = re.compile(r"(?P<head>\b(?:proxy-)?authorization[ \t]*:[ \t]*)(?P<value>[^\r\n\"',}]+)", re.IGNORECASE)


def normalise_name(name: str) -> str:
    bare = name.strip().strip("'\"").lstrip("-")
    return _CAMEL.sub("_", bare).lower().replace("-", "_").replace(".", "_")


def is_secret_name(name: str) -> bool:
    """True for a key, flag or variable name whose value is a secret (``HF_TOKEN``, ``api_key``,
    ``--api-key``, ``"DB_PASSWORD"``, ``hfToken``, ``PGPASSWORD``, ``remote_auth``, ``AccountKey``);
    False for pointers (``passphrase_env``) and for names that merely contain a secret-like word
    (``--prefill-tokens-per-s``, ``first_token_ns``)."""
    n = normalise_name(name)
    if not n or n.endswith(POINTER_SUFFIXES) or n.endswith(NOT_SECRET_SUFFIXES):
        return False
    if n in SECRET_NAMES or n.endswith(SECRET_SUFFIXES):
        return True
    if any(w in n for w in SECRET_WORDS):
        return True
    last = n.rsplit("_", 1)[-1]
    return "token" in last and not _TOKEN_QUANTITY.search(last)


def is_secret_flag(arg: str, *, short: bool = False) -> bool:
    """``--api-key``, ``--password``, ``--token``, ``--hf-token``, ``--x-key``; with ``short``, also
    :data:`SECRET_SHORT_FLAGS` (``-k``)."""
    return arg.startswith("-") and (is_secret_name(arg) or (short and arg in SECRET_SHORT_FLAGS))


_WORDS = re.compile(r"(\s+)")


def mask_command_text(text: str) -> str:
    """A command line written as one string (a config's ``command: "vllm serve m --api-key sk-.."``,
    a block scalar with ``\\`` continuations) with the value after each secret flag (short ones
    included) and every ``--secret=value`` / ``SECRET=value`` masked, spacing and the rest kept."""
    parts = _WORDS.split(text)
    hide_next = False
    for i in range(0, len(parts), 2):
        word = parts[i]
        bare = word.strip("'\"")
        if not bare or bare == "\\":
            continue  # a line continuation keeps the flag waiting for its value
        if hide_next:
            parts[i], hide_next = MASK, False
            continue
        name, sep, _ = bare.partition("=")
        if sep and is_secret_name(name):
            parts[i] = f"{name}={MASK}"
        else:
            hide_next = not sep and is_secret_flag(bare, short=True)
    return "".join(parts)


def _masked_param(m: re.Match[str]) -> str:
    return m.group("head") + MASK if is_secret_name(m.group("key")) and m.group("value") else m.group(0)


def _masked_json(m: re.Match[str]) -> str:
    if not is_secret_name(m.group("key")):
        return m.group(0)
    quote = m.group("value")[0]
    return f"{m.group('head')}{quote}{MASK}{quote}"


def scrub_text(text: str) -> str:
    """``text`` with the secrets written inside values masked: URL passwords
    (``redis://:PW@h``, ``postgresql://u:PW@db``), secret query and connection-string parameters
    (``?password=``, ``sslpassword=``, ``AccountKey=``), secret keys of JSON text
    (``{"Authorization": "Bearer .."}``) and ``Authorization:`` header values."""
    if not text or not any(c in text for c in ":="):
        return text
    out = _URL_USERINFO.sub(lambda m: m.group("head") + MASK, text)
    out = _PARAM.sub(_masked_param, out)
    out = _JSON_PAIR.sub(_masked_json, out)
    return _HEADER.sub(lambda m: m.group("head") + MASK, out)


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
            out.append(scrub_text(arg))
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
    if isinstance(data, str):
        # a file's text (an LMCache YAML in a plan), a URL, a connection string
        return redact_config_text(data) if "\n" in data else scrub_text(data)
    return data


def redact_command_line(line: str) -> str:
    """A shell command line with its secret arguments masked (unparseable lines are masked whole
    when they mention a secret name)."""
    try:
        return shlex.join(redact_argv(shlex.split(line)))
    except ValueError:
        return MASK if _SECRET.search(line) else scrub_text(line)


def redact_config_text(text: str) -> str:
    """YAML-like text with the values of secret-named keys replaced by ``'***'`` (line by line, the
    key decided by :func:`is_secret_name`) and secrets inside other values masked (:func:`scrub_text`)."""
    out = _YAML_PAIR.sub(lambda m: f"{m.group('head')}'{MASK}'" if is_secret_name(m.group("key")) else m.group(0),
                         text)
    return "\n".join(scrub_text(line) for line in out.split("\n"))


def mask_values(text: str, secrets: Any) -> str:
    """``text`` with every occurrence of each known secret value replaced by the mask (for logs an
    engine wrote: vLLM echoes its arguments). Values shorter than 4 characters are not searched
    (they would mask ordinary words)."""
    for value in sorted({str(v) for v in secrets if v is not None and len(str(v)) >= 4}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text
