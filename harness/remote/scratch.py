"""Deletion by containment: the one place that decides whether kvgate may delete a path on a node.

kvgate deletes only directories it created itself. When it creates one (fio scratch, an arm's KV
directory) it writes a marker file ``.kvgate-owner`` holding the owner id (the campaign id) into
the fresh directory. A removal is allowed only when, checked on the node in the same command
that deletes:

* the path is absolute and normalised (no ``.``/``..``/``//``), checked before anything is sent;
* it resolves to itself (``realpath``): no symbolic link anywhere on the way;
* it is a directory, not a link, holding a regular-file marker whose first line is the owner id;
* ``rm`` then stays on the directory's filesystem (``--one-file-system``: a bind mount planted
  inside is not descended into) and never follows links inside.

A directory that existed before kvgate came (a user's ``file://`` remote directory, a shared
path) is never marked, so it is never deleted. Every removal, refused or done, is returned as a
:class:`Removal` that the caller records (``commands.jsonl``/notes); a refusal is never silent.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from harness.config.paths import check_node_path
from harness.remote.base import Executor

__all__ = ["ENGINE_OWNER", "MARKER", "Removal", "create_owned_dir", "remove_named_child", "remove_owned_dir",
           "remove_owned_file", "remove_stale_dirs"]

MARKER = ".kvgate-owner"
ENGINE_OWNER = "kvgate-engine"  # KV directories an engine created outside a campaign

# $1 = directory, $2 = owner id. Prints one word: created | ours | other <id> | foreign.
_CREATE = r"""p=$1 owner=$2 m="$1/.kvgate-owner"
umask 077
mkdir -p -- "$(dirname -- "$p")" || exit 4
if mkdir -- "$p" 2>/dev/null; then
  printf '%s\n' "$owner" > "$m" || { rm -f -- "$m"; rmdir -- "$p"; exit 4; }
  echo created
  exit 0
fi
if [ -d "$p" ] && [ ! -L "$p" ] && [ -f "$m" ] && [ ! -L "$m" ]; then
  got=
  read -r got < "$m" || :
  if [ "$got" = "$owner" ]; then echo ours; else echo "other $got"; fi
  exit 0
fi
echo foreign
"""

# $1 = directory, $2 = owner id. Exit 0 removed/absent (prints removed|absent), 3 refused (prints why).
_REMOVE = r"""p=$1 owner=$2 m="$1/.kvgate-owner"
if [ ! -e "$p" ] && [ ! -L "$p" ]; then echo absent; exit 0; fi
real=$(realpath -e -- "$p" 2>/dev/null) || { echo "cannot resolve $p"; exit 3; }
if [ "$real" != "$p" ]; then echo "$p resolves to $real (a symbolic link on the way)"; exit 3; fi
if [ -L "$p" ] || [ ! -d "$p" ]; then echo "$p is not a directory"; exit 3; fi
if [ -L "$m" ] || [ ! -f "$m" ]; then echo "$p has no kvgate marker (kvgate did not create it)"; exit 3; fi
got=
read -r got < "$m" || :
if [ -z "$got" ]; then echo "$p has an empty kvgate marker"; exit 3; fi
if [ -n "$owner" ] && [ "$got" != "$owner" ]; then echo "$p is marked for another campaign ($got)"; exit 3; fi
rm -rf --one-file-system -- "$p" || { echo "rm failed"; exit 5; }
echo removed
"""


# $1 = file, $2 = owner id: a file directly inside a marked directory (the fio probe file).
_REMOVE_FILE = r"""p=$1 owner=$2 d=$(dirname -- "$1") m="$(dirname -- "$1")/.kvgate-owner"
if [ ! -e "$p" ] && [ ! -L "$p" ]; then echo absent; exit 0; fi
real=$(realpath -e -- "$d" 2>/dev/null) || { echo "cannot resolve $d"; exit 3; }
if [ "$real" != "$d" ]; then echo "$d resolves to $real (a symbolic link on the way)"; exit 3; fi
if [ -L "$m" ] || [ ! -f "$m" ]; then echo "$d has no kvgate marker (kvgate did not create it)"; exit 3; fi
got=
read -r got < "$m" || :
if [ -z "$got" ]; then echo "$d has an empty kvgate marker"; exit 3; fi
if [ -n "$owner" ] && [ "$got" != "$owner" ]; then echo "$d is marked for another campaign ($got)"; exit 3; fi
if [ -d "$p" ] && [ ! -L "$p" ]; then echo "$p is a directory"; exit 3; fi
if [ "$(basename -- "$p")" = .kvgate-owner ]; then echo "$p is the marker itself"; exit 3; fi
rm -f -- "$p" || { echo "rm failed"; exit 5; }
echo removed
"""


@dataclass(frozen=True)
class Removal:
    """What became of one removal request."""

    node: str
    path: str
    removed: bool  # True: deleted now; False: refused, absent or failed (see ``outcome``)
    outcome: str  # removed | absent | refused | failed
    reason: str = ""
    argv: tuple[str, ...] = ()
    exit_code: Optional[int] = None
    duration_s: float = 0.0

    def describe(self) -> str:
        text = f"{self.node}: {self.outcome} {self.path}"
        return f"{text}: {self.reason}" if self.reason else text


def _check(path: str) -> Optional[str]:
    try:
        check_node_path(path)
    except ValueError as exc:
        return str(exc)
    if path == "/" or path.count("/") < 2:
        return f"{path!r} is a top-level directory"
    return None


def create_owned_dir(executor: Executor, path: str, owner: str) -> str:
    """Create ``path`` and mark it for ``owner`` unless it exists. Returns ``created``, ``ours``
    (already marked for this owner), ``other <id>`` or ``foreign`` (not kvgate's: it will never be
    deleted). Raises ValueError for an unsafe path, RemoteError when the node cannot create it."""
    problem = _check(path)
    if problem:
        raise ValueError(f"refusing to create {path!r}: {problem}")
    if not owner or "\n" in owner or "\x00" in owner:
        raise ValueError(f"invalid owner id {owner!r}")
    res = executor.run(["sh", "-c", _CREATE, "kvgate-mkdir", path, owner], timeout=60.0)
    return res.stdout.strip() or "foreign"


def remove_owned_dir(executor: Executor, path: str, owner: Optional[str]) -> Removal:
    """Delete ``path`` on the node only if it is a directory kvgate created and marked for
    ``owner`` (see the module docstring); every other case is refused with the reason. ``owner``
    None accepts any kvgate marker (an engine stopped outside a campaign)."""
    return _remove(executor, path, owner, _REMOVE, "kvgate-rm")


def remove_owned_file(executor: Executor, path: str, owner: Optional[str]) -> Removal:
    """Delete the file ``path`` on the node only if its directory is one kvgate created and marked
    for ``owner`` (the same checks as :func:`remove_owned_dir`, on the parent directory)."""
    return _remove(executor, path, owner, _REMOVE_FILE, "kvgate-rm-file")


def _remove(executor: Executor, path: str, owner: Optional[str], script: str, name: str) -> Removal:
    owner = owner or ""
    if "\n" in owner or "\x00" in owner:
        raise ValueError(f"invalid owner id {owner!r}")
    argv = ("sh", "-c", f"<{name}>", name, path, owner)
    problem = _check(path)
    if problem:
        return Removal(executor.node, path, False, "refused", problem, argv)
    res = executor.run(["sh", "-c", script, name, path, owner], timeout=600.0, check=False)
    word = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
    if res.exit_code == 0 and word in ("removed", "absent"):
        return Removal(executor.node, path, word == "removed", word, "", argv, 0, res.duration_s)
    outcome = "refused" if res.exit_code == 3 else "failed"
    reason = word or (res.stderr.strip()[-300:] or f"exit {res.exit_code}")
    return Removal(executor.node, path, False, outcome, reason, argv, res.exit_code, res.duration_s)


def remove_named_child(executor: Executor, path: str, *, parent: str, prefix: str = "",
                       suffix: str = "", directory: bool = False) -> bool:
    """Remove a name kvgate gave directly under ``parent``: an empty directory with ``rmdir`` (a
    cgroup: the kernel removes a cgroup by the rmdir of its directory and refuses one with processes
    in it) or a file with ``rm -f``. Only a normalised path whose parent is exactly ``parent`` and
    whose name starts with ``prefix`` and ends with ``suffix`` (at least one given); else ValueError.
    True when the command succeeded."""
    name = posixpath.basename(path)
    problem = _check(path)
    if problem is None and (posixpath.dirname(path) != parent or not (prefix or suffix)
                            or not name.startswith(prefix) or not name.endswith(suffix) or name in (prefix, suffix)):
        problem = f"not a {prefix}*{suffix} name directly under {parent}"
    if problem:
        raise ValueError(f"refusing to remove {path!r}: {problem}")
    argv = ["rmdir", "--", path] if directory else ["rm", "-f", "--", path]
    return executor.run(argv, check=False, timeout=30.0).ok


def remove_stale_dirs(executor: Executor, parent: str, prefix: str, owner: str) -> list[Removal]:
    """Remove the directories ``<parent>/<prefix>*`` that this owner left behind (a run killed
    with SIGKILL); directories of other owners are left alone and not reported."""
    if _check(parent + "/x") or not prefix or "/" in prefix or any(c in prefix for c in "*?[\\"):
        return []
    res = executor.run(["find", parent, "-mindepth", "1", "-maxdepth", "1", "-type", "d",
                        "-name", prefix + "*"], timeout=120.0, check=False)
    out: list[Removal] = []
    for line in res.stdout.splitlines():
        path = line.strip()
        if not path.startswith(parent.rstrip("/") + "/" + prefix):
            continue
        marker = executor.run(["cat", "--", f"{path}/{MARKER}"], timeout=30.0, check=False)
        if marker.exit_code != 0 or marker.stdout.split("\n", 1)[0] != owner:
            continue
        out.append(remove_owned_dir(executor, path, owner))
    return out


def describe_argv(argv: Sequence[str]) -> str:
    return shlex.join(argv)
