"""What one gate run carries from step to step: the validated inputs, the campaign directory,
one executor per node (opened lazily, closed at the end), and the faults met on the way."""

from __future__ import annotations

import getpass
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.config.gatespec import GateSpec
from harness.config.inventory import Inventory, Node
from harness.config.profile import Profile
from harness.errors import InputError
from harness.redact import redact_data
from harness.remote.base import Executor, RemoteError
from harness.store.campaign import Campaign, GateDir

RAY_ACTORS = "ray-actors.json"  # the Ray node actors this gate's runs created (harness.remote.ray.actorbook)


@dataclass
class GateRun:
    gate: str
    spec: GateSpec
    inventory: Inventory
    profile: Profile
    campaign: Campaign
    gate_dir: GateDir
    accept_new_host_keys: bool = False
    progress: bool = True
    faults: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # node -> the cgroup.procs file of the cgroup that enforces its provisioned storage rates
    # (harness.probes.blkthrottle): every command of the run on that node starts in it
    cgroups: dict[str, str] = field(default_factory=dict)
    _executors: dict[str, Executor] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _unrecorded: list[dict[str, Any]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return Path(self.gate_dir.path)

    def executor(self, node: str) -> Executor:
        """The node's executor, connected on first use. Raises a RemoteError when unreachable."""
        from harness.remote.connect import executor_for

        with self._lock:
            ex = self._executors.get(node)
        if ex is None:
            from harness.remote.recording import RecordingExecutor

            # every command on the node goes to commands.jsonl with its exit code and duration
            ex = RecordingExecutor(executor_for(self.inventory, node, accept_new_host_keys=self.accept_new_host_keys,
                                                cgroup=self.cgroups.get(node),
                                                ray_actors=self.path / RAY_ACTORS),
                                   self.gate_dir.record_command)
            with self._lock:
                self._executors[node] = ex
        return ex

    def drop_executor(self, node: str) -> None:
        """Forget the node's executor (after a dropped connection): the next use reconnects."""
        with self._lock:
            ex = self._executors.pop(node, None)
        if ex is not None:
            try:
                ex.close()
            except (RemoteError, OSError):
                pass

    def fault(self, what: str, exc: Optional[BaseException] = None) -> None:
        """An infrastructure fault that kept something from being measured (recorded as evidence;
        the gate exits 4 unless it passed anyway). When the reports disk is full the record is kept
        in memory and written by :meth:`flush_faults` once there is space again."""
        text = what if exc is None else f"{what}: {exc}"
        with self._lock:
            self.faults.append(text)
        self._record({"fault": text})

    def _record(self, rec: dict[str, Any]) -> None:
        from harness.errors import StorageFull

        with self._lock:
            pending = [*self._unrecorded, rec]
            self._unrecorded = []
        for i, item in enumerate(pending):
            try:
                self.gate_dir.append_jsonl("faults.jsonl", item)
            except StorageFull:
                with self._lock:
                    self._unrecorded = pending[i:] + self._unrecorded
                return

    def flush_faults(self, wait_s: float = 0.0, poll_s: float = 1.0) -> bool:
        """Write the fault records a full disk held back, retrying for up to ``wait_s`` seconds
        (space may come back); True when every fault is on disk."""
        import time

        deadline = time.monotonic() + wait_s
        while True:
            with self._lock:
                if not self._unrecorded:
                    return True
                rec = self._unrecorded.pop(0)
            self._record(rec)
            with self._lock:
                if not self._unrecorded:
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)

    def warn(self, what: str, exc: Optional[BaseException] = None) -> None:
        """Something went wrong that did not affect a measurement (log collection, say)."""
        text = what if exc is None else f"{what}: {exc}"
        with self._lock:
            self.notes.append(f"warning: {text}")
        self._record({"warning": text})

    # Node directories: created and deleted by containment (harness.remote.scratch) ---------
    def create_owned(self, executor: Executor, path: str) -> str:
        """Create ``path`` on the node marked for this campaign (kept as is when it exists)."""
        from harness.remote.scratch import create_owned_dir

        state = create_owned_dir(executor, path, self.campaign.id)
        self.gate_dir.record_command(executor.node, ["kvgate-mkdir", path], error=None if state in (
            "created", "ours") else f"exists and is not this campaign's ({state}): it will not be removed")
        return state

    def remove_owned(self, executor: Executor, path: str) -> None:
        """Remove ``path`` only when this campaign created it; a refusal is recorded, never silent."""
        from harness.remote.scratch import remove_owned_dir

        try:
            removal = remove_owned_dir(executor, path, self.campaign.id)
        except RemoteError as exc:
            self.warn(f"{executor.node}: could not remove {path}", exc)
            return
        self.gate_dir.record_removal(removal)
        if removal.outcome == "refused":
            self.warn(f"kept {path} on {executor.node}: {removal.reason}")
        elif removal.outcome == "failed":
            self.warn(f"{executor.node}: removing {path} failed: {removal.reason}")

    def close(self) -> None:
        """Close every executor; a Ray node actor this run used ends with it, except G4's (its
        soak's followers reattach to it, and a replaced one is a recorded fault)."""
        with self._lock:
            executors = list(self._executors.values())
            self._executors.clear()
        for ex in executors:
            try:
                if self.gate != "G4":
                    from harness.remote.ray.executor import retire_actor  # a no-op unless ex is Ray's

                    retire_actor(ex)
                ex.close()
            except (RemoteError, OSError):
                pass

    # Node roles ----------------------------------------------------------------------------
    def server_nodes(self) -> list[Node]:
        nodes = self.inventory.nodes_with_role("server")
        if not nodes:
            raise InputError(f"inventory {self.inventory.cluster!r} has no node with role 'server'")
        return nodes

    def client_node(self, server: Node) -> Node:
        """The node that runs the load next to ``server``: the server itself when it is a client."""
        if "client" in server.roles:
            return server
        clients = self.inventory.nodes_with_role("client")
        return clients[0] if clients else server

    def node_with_target(self, target: str) -> Node:
        servers = self.server_nodes()
        for n in servers + self.inventory.nodes:
            if n.target(target) is not None:
                return n
        raise InputError(f"no node of inventory {self.inventory.cluster!r} has storage target {target!r}")


@dataclass
class StandaloneOptions:
    """What every run outside G1-G4 (the nightly, the cliff) takes from its command line."""

    campaign: Optional[str] = None
    operator: Optional[str] = None
    accept_new_host_keys: bool = False
    progress: bool = True


def open_standalone_run(root: Path, name: str, gate: str, spec: GateSpec, inventory: Inventory, profile: Profile, *,
                        inventory_path: Path, profile_path: Path, opts: StandaloneOptions) -> GateRun:
    """A run outside G1-G4 (the nightly, the cliff) in a campaign of its own, opened and locked, with
    one gate folder named after ``gate`` (as signing requires). The caller closes ``run.campaign``."""
    camp = Campaign.open(root, name, inventory_path=Path(inventory_path), profile_path=Path(profile_path),
                         operator=opts.operator or getpass.getuser(), create=True)
    try:
        return GateRun(gate, spec, inventory, profile, camp, GateDir(camp.path / gate, gate),
                       accept_new_host_keys=opts.accept_new_host_keys, progress=opts.progress)
    except BaseException:
        camp.close()
        raise


def summary_of(run: GateRun) -> dict[str, Any]:
    """What was tested, for the first page of the report."""
    inv = run.inventory
    prof = run.profile
    return {
        "inventory": {
            "cluster": inv.cluster,
            "nodes": [{"name": n.name, "host": n.host, "platform": n.platform, "roles": list(n.roles),
                       "accelerators": n.accelerators.model_dump(mode="json") if n.accelerators else None,
                       "storage": [t.name for t in n.storage]} for n in inv.nodes],
        },
        "profile": {
            "name": prof.name,
            "description": prof.description,
            "model": prof.model.served_name or prof.model.name,
            "tensor_parallel_size": prof.model.tensor_parallel_size,
            "instances_per_node": prof.model.instances_per_node,
            "kv_bytes_per_token": prof.model.kv_geometry.bytes_per_token,
            "engine": prof.engine.kind,
            # declared for every engine: with kvgate's own settings, all that reaches it (secrets masked)
            "engine_env": redact_data(dict(prof.engine.env)),
            "arms": [{"name": a.name, "description": a.description, "storage": a.storage, "offload": a.offload,
                      "lmcache": a.lmcache.model_dump(mode="json", exclude_none=True) if a.offload else None}
                     for a in prof.arms],
            "baseline": prof.baseline,
            "candidate": prof.candidate,
            "recompute": prof.recompute,
            "load": prof.load.model_dump(mode="json"),
        },
    }
