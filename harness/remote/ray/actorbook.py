"""The record of the node actors kvgate created: name and Ray ActorID, kept where the run keeps its state.

A node actor's name carries a random token drawn when kvgate creates it (``kvgate-node-<node>-<32
hex>``), so no other user of the cluster can take the name first; the ActorID Ray assigns at that
creation is written here at once. A later call, another controller or ``--resume`` accepts an actor
under that name only when its ActorID is the recorded one (``cluster.node_actor``). A gate run keeps
its book in its gate directory (``ray-actors.json``, beside ``state.jsonl``); a command outside a
campaign (``kvgate ping``, ``kvgate facts``) uses the controller's own book
(``$KVGATE_STATE_DIR``, else ``$XDG_STATE_HOME/kvgate``, else ``~/.local/state/kvgate``), so
successive commands reuse the actors it started. Entries are keyed by cluster address, namespace
and node. The file is rewritten whole (temp file, fsync, rename) under an exclusive lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from harness.deletion import remove_file
from harness.errors import InputError

FILE = "ray-actors.json"
MAX_BOOK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ActorRecord:
    name: str
    actor_id: str  # hex, as Ray assigned it when kvgate created the actor


def book_key(address: str, namespace: str, node: str) -> str:
    return f"{address} {namespace} {node}"


class ActorBook:
    """One JSON file of ``{key: {"name", "actor_id"}}``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def recall(self, key: str) -> Optional[ActorRecord]:
        entry = self._read().get(key)
        if not (isinstance(entry, dict) and isinstance(entry.get("name"), str)
                and isinstance(entry.get("actor_id"), str)):
            return None
        return ActorRecord(entry["name"], entry["actor_id"])

    def remember(self, key: str, record: ActorRecord) -> None:
        with self._locked():
            data = self._read()
            data[key] = {"name": record.name, "actor_id": record.actor_id}
            self._write(data)

    def _read(self) -> dict[str, Any]:
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read(MAX_BOOK_BYTES + 1)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise InputError(f"{self.path}: cannot read kvgate's record of its Ray actors: {exc.strerror}") from exc
        try:
            data = json.loads(raw) if len(raw) <= MAX_BOOK_BYTES else None
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("actors"), dict):
            raise InputError(f"{self.path}: not kvgate's record of its Ray actors (expected a JSON object with "
                             "\"actors\"); move it away to start new actors")
        return dict(data["actors"])

    def _write(self, actors: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".kvgate-", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump({"actors": actors}, fh, indent=2, sort_keys=True)
                fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            remove_file(tmp, within=str(self.path.parent), marker=".kvgate-")
            raise

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path.parent / f".{self.path.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def controller_book() -> ActorBook:
    """The book of the actors this controller's user started outside any campaign."""
    base = os.environ.get("KVGATE_STATE_DIR")
    if not base:
        xdg = os.environ.get("XDG_STATE_HOME")
        base = os.path.join(xdg, "kvgate") if xdg else os.path.join(os.path.expanduser("~"), ".local", "state",
                                                                   "kvgate")
    return ActorBook(Path(base) / FILE)
