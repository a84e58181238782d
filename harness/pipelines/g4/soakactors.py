"""A soak's Ray node actors: a node actor replaced mid-soak is a recorded fault, never a lost window.

Through the Ray executor, the soak's agent and the engine node's watchdog are detached processes a
node actor started; they outlive the actor, and a new actor (started by the next command) pulls
their files by offset as before, so no window is lost or doubled. That the actor was replaced
(killed, or its Ray node restarted) is still a fault of the run's infrastructure, and is recorded.

``node-actors.json`` in the soak's evidence keeps the actor id each node had when last seen and the
replacements seen so far, by whichever controller saw them (controllers come and go during a
soak); the controller that finishes the gate records each replacement as a fault, once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.errors import InfraError
from harness.pipelines.shared.context import GateRun
from harness.remote.base import RemoteError
from harness.remote.ray.executor import actor_identity
from harness.store.durable import write_atomic

FILE = "node-actors.json"


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"actors": {}, "replaced": []}
    return data if isinstance(data, dict) else {"actors": {}, "replaced": []}


def note_node_actors(run: GateRun, soak_dir: Path, nodes: list[str]) -> None:
    """Look at the node actors of ``nodes`` (Ray nodes only; others are skipped at no cost)."""
    path = soak_dir / FILE
    data = _load(path)
    actors: dict[str, str] = data.setdefault("actors", {})
    changed = False
    for node in dict.fromkeys(nodes):
        try:
            ident = actor_identity(run.executor(node))
        except (RemoteError, InfraError):
            continue  # unreachable now: the soak's own pull reports and retries it
        if ident is None or actors.get(node) == ident:
            continue
        if node in actors:
            data.setdefault("replaced", []).append(
                f"{node}: its Ray node actor was replaced during the soak (killed, or its Ray node restarted; "
                f"actor {actors[node][:12]} -> {ident[:12]}); the soak's processes are detached and ran on, "
                "and their files were pulled by offset (no window lost or doubled)")
        actors[node] = ident
        changed = True
    if changed:
        write_atomic(path, (json.dumps(data, indent=2) + "\n").encode())


def record_replacements(run: GateRun, soak_dir: Path) -> None:
    """Every replacement seen during the soak, as a fault of this (the finishing) run."""
    for text in _load(soak_dir / FILE).get("replaced") or []:
        run.fault(str(text))
