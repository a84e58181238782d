"""Local deletion by containment: the one place kvgate removes a file on the machine it runs on
(the controller, the node agent, the emulator). Stdlib only (the agent bundle carries it).

Remote deletions go through :mod:`harness.remote.scratch` (directories kvgate created and marked,
files inside them); this module is its local twin for the files kvgate itself names. A removal
happens only when:

* the path (a relative one taken from the current directory) is normalised (no ``.``/``..`` component, no ``//``);
* its parent directory resolves (``realpath``) inside ``within``, the directory the caller owns
  (its temp directory, its tier directory, a campaign folder), also resolved: a symbolic link on
  the way that leads elsewhere is refused;
* its base name carries kvgate's owner marker for that kind of file (``marker``: ``.kvgate-``,
  ``.tmp``, ``.kvchunk``...), so a name kvgate never gives is never removed;
* it is not a directory (a symbolic link is removed itself, never what it points to).

A refusal raises :class:`DeletionRefused` (an OSError, so best-effort clean-ups that already catch
OSError stay quiet, and never delete instead). ``tests/security/test_deletion_containment.py``
walks the code and fails on any other ``unlink``, ``rmtree``, ``remove`` or ``rm``.
"""

from __future__ import annotations

import os
import stat
from typing import Callable, Union

__all__ = ["DeletionRefused", "check_owned_name", "remove_file", "remove_name_with"]

PathLike = Union[str, "os.PathLike[str]"]


class DeletionRefused(OSError):
    """kvgate would not delete this path; the message says why."""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def check_owned_name(path: str, marker: str) -> str:
    """``path`` itself when it is normalised and its name carries ``marker`` (for a path on a node,
    removed over SFTP, which unlinks the name and never follows a link); else DeletionRefused."""
    if not marker:
        raise DeletionRefused(f"refusing to delete {path!r}: no owner marker given")
    if "\x00" in path or not path.startswith("/"):
        raise DeletionRefused(f"refusing to delete {path!r}: not an absolute path")
    parts = path.split("/")[1:]
    if any(p in ("", ".", "..") for p in parts):
        raise DeletionRefused(f"refusing to delete {path!r}: not a normalised path")
    if marker not in parts[-1]:
        raise DeletionRefused(f"refusing to delete {path!r}: its name lacks kvgate's marker {marker!r}")
    return path


def _check(path: str, within: str, marker: str) -> str:
    name = check_owned_name(path, marker).rsplit("/", 1)[-1]
    root = os.path.realpath(within)
    parent = os.path.realpath(os.path.dirname(path))
    if not _inside(parent, root):
        raise DeletionRefused(f"refusing to delete {path!r}: it resolves to {parent}/{name}, outside {root}")
    return os.path.join(parent, name)


def remove_file(path: PathLike, *, within: PathLike, marker: str, missing_ok: bool = True) -> bool:
    """Delete the file ``path`` if the rules of the module docstring allow it. Returns True when a
    file was removed, False when there was none (``missing_ok``). Raises DeletionRefused."""
    given = os.fspath(path)
    if not given.startswith("/"):
        given = os.path.join(os.getcwd(), given)  # joined, not normalised: '..' is still refused
    real = _check(given, os.fspath(within), marker)
    try:
        st = os.lstat(real)
    except FileNotFoundError:
        if missing_ok:
            return False
        raise
    if stat.S_ISDIR(st.st_mode):
        raise DeletionRefused(f"refusing to delete {os.fspath(path)!r}: it is a directory")
    try:
        os.unlink(real)
    except FileNotFoundError:
        if not missing_ok:
            raise
        return False
    return True


def remove_name_with(remove: Callable[[str], object], path: str, *, marker: str) -> None:
    """Remove ``path`` with ``remove`` (an SFTP client's ``remove``: it unlinks the name and never
    follows a link) once :func:`check_owned_name` accepts it; raises DeletionRefused otherwise."""
    remove(check_owned_name(path, marker))
