"""The controller's side of a soak on a node: start the agent's soak mode detached, save its
handle, and later (any controller, any time) reattach, pull what it wrote and look at it.

Local copy, under the gate's ``evidence/soak/``: ``handle.json`` (the reattach point; no secret),
``windows.jsonl``, ``events.jsonl`` and ``health.jsonl`` (exact byte prefixes of the node's files,
pulled by offset with ``harness.agent.remote.pull_lines``: nothing duplicated or lost across
controller crashes, SSH drops or restarts), ``windows/wNNNNNN.jsonl.gz`` (each closed window's
records, copied once), ``probe-start.json``, ``probe-end.json``, ``done.json``, ``soak.json``.
"""

from __future__ import annotations

import json
import posixpath
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from harness.agent.remote import AgentLoad, pull_lines
from harness.load.soak import CONFIG, DONE, EVENTS, HEALTH, STOP, WINDOWS_INDEX
from harness.load.soakwatch import WATCH_CONFIG
from harness.remote.base import Executor, ProcessState, RemoteError
from harness.store.durable import write_atomic

HANDLE = "handle.json"
_SMALL_FILES = (CONFIG, "probe-start.json", "probe-end.json", DONE)
WATCH_DIR = "watch"
WATCH_HANDLE = "watch-handle.json"


class SoakHandle(AgentLoad):
    """The soak agent's reattach point: an :class:`AgentLoad` saved as ``handle.json``."""

    handle_file = HANDLE


def start_soak(executor: Executor, *, python: str, agent: str, workdir: str, local_dir: Path,
               soak_args: list[str], name: str = "soak") -> SoakHandle:
    """``python3 -I -S AGENT soak SOAK_ARGS --out <workdir>/<name>-out``, detached; handle saved first."""
    remote_out = posixpath.join(workdir, f"{name}-out")
    executor.run(["mkdir", "-p", "--", remote_out], timeout=60)
    argv = [python, "-I", "-S", agent, "soak", *soak_args, "--out", remote_out]
    handle = executor.start_detached(argv, workdir=workdir, name=name)
    sh = SoakHandle(executor.node, python, agent, remote_out, str(local_dir), handle)
    sh.save()
    return sh


class WatchHandle(AgentLoad):
    """The engine node's watchdog (``soak-watch``): an :class:`AgentLoad` saved as ``watch-handle.json``."""

    handle_file = WATCH_HANDLE


def start_watch(executor: Executor, *, python: str, agent: str, workdir: str, local_dir: Path,
                watch_args: list[str]) -> WatchHandle:
    """``python3 -I -S AGENT soak-watch WATCH_ARGS --out <workdir>/watch-out``, detached on the
    engine's node; its handle saved first."""
    remote_out = posixpath.join(workdir, "watch-out")
    executor.run(["mkdir", "-p", "--", remote_out], timeout=60)
    argv = [python, "-I", "-S", agent, "soak-watch", *watch_args, "--out", remote_out]
    handle = executor.start_detached(argv, workdir=workdir, name="soak-watch")
    wh = WatchHandle(executor.node, python, agent, remote_out, str(local_dir), handle)
    wh.save()
    return wh


def pull_watch(executor: Executor, wh: WatchHandle) -> tuple[ProcessState, list[dict[str, Any]]]:
    """Poll the watcher (first: a finished one's pull is then complete), pull its new events and,
    once written, its ``watch.json`` and ``done.json``."""
    state = executor.poll(wh.handle)
    local = Path(wh.local_dir)
    events = pull_lines(executor, wh.python, wh.agent, wh.remote(EVENTS), local / EVENTS)
    pull_lines(executor, wh.python, wh.agent, wh.remote(HEALTH), local / HEALTH)
    _copy_once(executor, wh, (WATCH_CONFIG, DONE))
    return state, events


def _copy_once(executor: Executor, agent: AgentLoad, names: tuple[str, ...]) -> None:
    """Copy each of the agent's small files ``names`` (written whole, once) that is on the node
    and not here yet; one not written yet is tried again at the next pull."""
    local = Path(agent.local_dir)
    for name in names:
        if not (local / name).exists():
            try:
                data = executor.read_file(agent.remote(name))
            except RemoteError:
                continue
            write_atomic(local / name, data)


def stop_watch(executor: Executor, wh: WatchHandle, *, timeout_s: float = 30.0) -> ProcessState:
    """Ask the watcher to end (``STOP``: it takes one last look and writes ``watch_end``), wait for
    it, SIGTERM it after ``timeout_s``, and pull what it wrote."""
    state = executor.poll(wh.handle)
    if state.running:
        executor.write_file(wh.remote(STOP), b"the soak has ended\n")
        deadline = time.monotonic() + timeout_s
        while state.running and time.monotonic() < deadline:
            time.sleep(0.2)
            state = executor.poll(wh.handle)
        if state.running:
            state = executor.stop(wh.handle, grace=10.0)
    pull_watch(executor, wh)
    return state


@dataclass
class Pulled:
    state: ProcessState
    windows: list[dict[str, Any]]
    events: list[dict[str, Any]]
    health: list[dict[str, Any]]


def pull(executor: Executor, sh: SoakHandle) -> Pulled:
    """Poll first (so a finished soak's pull is complete), then pull every growing file and copy
    the record files of newly closed windows."""
    state = executor.poll(sh.handle)
    local = Path(sh.local_dir)
    wins = pull_lines(executor, sh.python, sh.agent, sh.remote(WINDOWS_INDEX), local / WINDOWS_INDEX)
    events = pull_lines(executor, sh.python, sh.agent, sh.remote(EVENTS), local / EVENTS)
    health = pull_lines(executor, sh.python, sh.agent, sh.remote(HEALTH), local / HEALTH)
    fetch_window_files(executor, sh)
    _copy_once(executor, sh, _SMALL_FILES)
    return Pulled(state, wins, events, health)


def fetch_window_files(executor: Executor, sh: SoakHandle) -> list[Path]:
    """Copy every closed window's record file named in the local index that is not here yet."""
    local = Path(sh.local_dir)
    got: list[Path] = []
    index = local / WINDOWS_INDEX
    if not index.exists():
        return got
    for line in index.read_text(encoding="utf-8").splitlines():
        try:
            name = str(json.loads(line).get("file") or "")
        except ValueError:
            continue
        if not name or ".." in name.split("/") or name.startswith("/"):
            continue
        dest = local / name
        if dest.exists():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            executor.get(sh.remote(name), str(dest))
        except RemoteError:
            continue  # tried again at the next pull
        got.append(dest)
    return got


def request_stop(executor: Executor, sh: SoakHandle) -> None:
    """Ask the soak to end early: it notices ``STOP`` within a second and closes its window."""
    executor.write_file(sh.remote(STOP), b"stopped by kvgate soak stop\n")


def read_local_jsonl(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    with open(path, "rb") as fh:
        for line in fh:
            if not line.endswith(b"\n"):
                break
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def read_local_json(path: Path) -> Optional[dict[str, Any]]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
