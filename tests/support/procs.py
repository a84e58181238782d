"""Processes contained in a directory a test (or a test fixture) owns, and stopping them.

A process belongs to a directory when its command line, its environment or its working directory
names that directory or a path inside it, and so do all its descendants (a shell script named by
its path starts children that name nothing). That is how kvgate's detached engines, LMCache servers
and soak agents are found after a test: they run with their evidence and work paths in argv, env
or cwd. Containment is by path, never by process name: only what the test's own directory names.
"""

from __future__ import annotations

import os
import re
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path

__all__ = ["HANG_GUARD_S", "alive", "argv", "contained_processes", "descendants", "processes_running",
           "stop_contained", "stop_processes", "unique_sleep", "wait_exited", "wait_for"]

# The wall-clock bound on a kvgate command a test runs and expects to end in seconds: it catches a
# hang, it measures no speed (a test that bounds a cost bounds CPU time or bytes). The parallel
# session runs at nice 10; beside a CPU hog at nice 0 its processes got 2-3% of a core, and a
# `kvgate validate` that takes 0.8 s of CPU ran past a 60 s bound (a fresh-clone CI run on
# 2026-12-05). Below pytest's own per-test timeout (300 s), so a hang still fails with this message.
HANG_GUARD_S = 240


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def descendants(pid: int, kids: dict[int, list[int]] | None = None) -> list[int]:
    """Every process below ``pid`` (sshd's per-connection children call setsid, so a process group
    kill would miss them)."""
    kids = _children_map() if kids is None else kids
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def argv(pid: int) -> list[str]:
    """The process's command line; [] once it is gone (it may end between listing and reading)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return raw.decode(errors="replace").split("\0")[:-1]


def unique_sleep() -> str:
    """A ``sleep`` duration (over a minute) that no other process on the machine has in its argv,
    so a test can find what its command left behind."""
    return f"60.{uuid.uuid4().int % 10**9:09d}"


def processes_running(args: list[str]) -> list[int]:
    """The live pids (never this process) whose argv is exactly ``args``."""
    me = os.getpid()
    return [pid for pid in (int(d) for d in os.listdir("/proc") if d.isdigit())
            if pid != me and argv(pid) == args and alive(pid)]


def wait_for(cond: Callable[[], bool], timeout: float, what: str, *, poll: float = 0.2) -> None:
    """Poll ``cond`` until it holds; past ``timeout`` the test fails naming ``what``. The timeout is a
    hang guard, not a measure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {what}")


def _mentions(pid: int, needle: re.Pattern[bytes]) -> bool:
    for name in ("cmdline", "environ"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as fh:
                if needle.search(fh.read()):
                    return True
        except OSError:
            pass
    try:
        return needle.match(os.readlink(f"/proc/{pid}/cwd").encode()) is not None
    except OSError:
        return False


def contained_processes(root: Path, *, exclude: frozenset[int] = frozenset()) -> list[int]:
    """The pids (never this process's) whose cmdline, environment or cwd name ``root`` or a path
    inside it, and their descendants; a sibling whose name merely starts the same (``test_x10`` for
    ``test_x1``) is not."""
    needle = re.compile(re.escape(str(root).encode()) + rb"(?![^/\x00\s:=\"'])")
    me = os.getpid()
    pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    found = [pid for pid in pids if pid != me and pid not in exclude and _mentions(pid, needle)]
    if found:
        kids = _children_map()
        below = {d for pid in found for d in descendants(pid, kids)}
        found += sorted(below - set(found) - exclude - {me})
    return found


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie has exited: only its parent's wait is missing, and it names no path
    any more)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_exited(pids: list[int], timeout: float) -> list[int]:
    """Wait up to ``timeout`` seconds for ``pids`` to exit; returns those still alive."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def stop_processes(pids: list[int], grace: float = 5.0) -> list[int]:
    """SIGTERM, then SIGKILL whatever is still alive after ``grace`` seconds (SIGCONT first, so a
    frozen process can act on the SIGTERM). Returns the pids that were alive when asked."""
    running = [p for p in pids if alive(p)]
    todo = list(running)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in todo:
            for s in ((signal.SIGCONT, sig) if sig == signal.SIGTERM else (sig,)):
                try:
                    os.kill(pid, s)
                except OSError:
                    pass
        todo = wait_exited(todo, grace)
        if not todo:
            break
    return running


def stop_contained(root: Path, *, exclude: frozenset[int] = frozenset(), grace: float = 5.0) -> list[int]:
    """Stop every process contained in ``root`` (see ``contained_processes``); returns their pids."""
    return stop_processes(contained_processes(root, exclude=exclude), grace)
