"""Validation of paths a configuration names on a node (storage targets, workdirs, ``file://``
URLs). Such a path ends up in files other programs interpret (fio job files, LMCache YAML, shell
wrappers) and in deletions, so it is checked once, at load time: absolute, no NUL or line break,
already normalised (no ``.``, ``..``, ``//`` or trailing ``/``). A path that would be rewritten by
normalisation is refused rather than silently changed: the user must see the path kvgate uses.
"""

from __future__ import annotations

import posixpath
from typing import Annotated, Optional

from pydantic import AfterValidator

__all__ = ["NodePath", "OptionalNodePath", "OptionalRelOrNodePath", "check_file_url", "check_node_path",
           "check_relative_or_node_path"]

_CONTROL = {chr(c) for c in range(0x20)} | {"\x7f"}


def check_node_path(value: str, *, what: str = "path") -> str:
    """``value`` unchanged when it is a safe absolute node path, else ValueError saying why."""
    bad = sorted({c for c in value if c in _CONTROL})
    if bad:
        names = ", ".join({"\x00": "NUL", "\n": "newline", "\r": "carriage return", "\t": "tab"}.get(c, repr(c))
                          for c in bad)
        raise ValueError(f"{what} {value!r} contains a control character ({names})")
    if not value.startswith("/"):
        raise ValueError(f"{what} {value!r} must be absolute (start with '/')")
    parts = value.split("/")[1:]
    if ".." in parts:
        raise ValueError(f"{what} {value!r} contains '..'; give the directory itself")
    norm = posixpath.normpath(value)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    if value != norm:
        raise ValueError(f"{what} {value!r} is not normalised; write it as {norm!r}")
    return value


def check_relative_or_node_path(value: str, *, what: str = "path") -> str:
    """An absolute node path (see :func:`check_node_path`) or a normalised relative one without
    ``..`` (resolved under a storage target by the caller)."""
    if value.startswith("/"):
        return check_node_path(value, what=what)
    check_node_path("/" + value, what=what)
    return value


def check_file_url(url: str, *, what: str = "URL") -> str:
    """A ``file://`` (or ``fs://``) URL whose path is a safe node path; other schemes pass unchanged."""
    if "\x00" in url or "\n" in url or "\r" in url:
        raise ValueError(f"{what} {url!r} contains a control character")
    path = fs_url_path(url) if url.startswith("fs://") else url[len("file://"):] if url.startswith("file://") else None
    if path is not None:
        trimmed = path.rstrip("/") or "/"
        check_node_path(trimmed, what=f"{what} path")
    return url


def fs_url_path(url: str) -> str:
    """The directory of LMCache's ``fs://[host:port]/path`` URL (its ``parse_remote_url(...).path``,
    ``lmcache/v1/storage_backend/connector/fs_adapter.py``, 0.5.6): everything from the first ``/``
    after the authority."""
    rest = url[len("fs://"):]
    slash = rest.find("/")
    return rest[slash:] if slash >= 0 else ""


def _node_path(value: str) -> str:
    return check_node_path(value)


def _optional_node_path(value: Optional[str]) -> Optional[str]:
    return None if value is None else check_node_path(value)


def _optional_rel_path(value: Optional[str]) -> Optional[str]:
    return None if value is None else check_relative_or_node_path(value)


NodePath = Annotated[str, AfterValidator(_node_path)]
OptionalNodePath = Annotated[Optional[str], AfterValidator(_optional_node_path)]
OptionalRelOrNodePath = Annotated[Optional[str], AfterValidator(_optional_rel_path)]
