"""The controller's side of a Ray cluster: connect once, list its nodes, name the Ray node of each
inventory node, and start (or find) the node actors.

A node actor is a *detached*, named actor (``kvgate-node-<node>`` in the inventory's namespace,
``kvgate`` by default): it outlives the controller that started it, and a controller started later,
on any machine that reaches the cluster, finds it by name. It is pinned to its Ray node: by a
custom resource (a small share of it, so a node's resource of 1 carries many actors) or by node
affinity (not soft) for a node id or IP. An actor found under its name on another Ray node than the
inventory now names is replaced. Actors take no CPU (``num_cpus=0``): they wait on processes.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from harness.errors import InputError
from harness.remote.base import Unreachable

if TYPE_CHECKING:
    from harness.config.inventory import Inventory, Node, RaySettings

DEFAULT_NAMESPACE = "kvgate"
ACTOR_PREFIX = "kvgate-node-"
ACTOR_THREADS = 64  # commands one node actor runs at once
RESOURCE_SHARE = 0.001  # of a mapping resource per actor
START_ATTEMPTS = 5
# A new actor is a new worker process (and kvgate's package unpacked on its node); a raylet starts
# them a few at a time (as many as it has CPUs): 32 at once took over 60 s on a loaded 2-core node.
START_TIMEOUT_S = 300.0
_lock = threading.Lock()
_connected: Optional[tuple[str, str]] = None


@dataclass(frozen=True)
class RayNode:
    """A live node of the cluster as Ray reports it."""

    node_id: str
    ip: str
    resources: dict[str, float]

    def claimed_by(self, how: str, value: str) -> bool:
        if how == "node_id":
            return self.node_id == value
        if how == "resource":
            return self.resources.get(value, 0.0) > 0
        return self.ip == _resolve(value)


def ray_module() -> Any:
    """Ray, imported on first use (a second of start-up) and typed loosely: its API is partly untyped."""
    import ray

    return ray


def _resolve(host: str) -> str:
    try:
        return socket.gethostbyname(host)
    except OSError:
        return host


def connect(address: str, namespace: str = DEFAULT_NAMESPACE) -> None:
    """Join the cluster as a driver (once per process; a second, different cluster is refused)."""
    global _connected
    ray = ray_module()
    with _lock:
        if _connected is not None:
            if _connected != (address, namespace):
                raise InputError(f"this controller is connected to the Ray cluster {_connected[0]} "
                                 f"(namespace {_connected[1]}); it cannot also use {address} ({namespace})")
            return
        try:
            ray.init(address=address, namespace=namespace, logging_level="WARNING", log_to_driver=False,
                     configure_logging=False, runtime_env=runtime_env())
        except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError...
            raise Unreachable(f"cannot join the Ray cluster at {address}: {exc}", host=address) from exc
        _connected = (address, namespace)


def settings(inventory: Inventory, node: Node) -> RaySettings:
    ray_settings = inventory.ray_settings(node)
    if ray_settings.address is None:
        raise InputError(f"node {node.name}: connection is ray but no cluster address is set "
                         "(defaults.ray.address)")
    return ray_settings


def live_nodes() -> list[RayNode]:
    ray = ray_module()

    return [RayNode(node_id=n["NodeID"], ip=n["NodeManagerAddress"], resources=dict(n.get("Resources") or {}))
            for n in ray.nodes() if n.get("Alive")]


def find_node(ray_settings: RaySettings, nodes: list[RayNode]) -> Optional[RayNode]:
    how, value = ray_settings.mapping()
    return next((n for n in nodes if n.claimed_by(how, value)), None)


def _placement(ray_settings: RaySettings, where: RayNode) -> dict[str, Any]:
    how, value = ray_settings.mapping()
    if how == "resource":
        return {"resources": {value: RESOURCE_SHARE}}
    strategies = ray_module().util.scheduling_strategies
    return {"scheduling_strategy": strategies.NodeAffinitySchedulingStrategy(node_id=where.node_id, soft=False)}


def runtime_env() -> dict[str, Any]:
    """Ray ships kvgate's own package with the job, so with its actors (nodes need nothing installed;
    a detached actor keeps the package it started with). Only at the job level: Ray refuses local
    directories in an actor's own runtime_env."""
    import harness

    return {"py_modules": [os.path.dirname(os.path.abspath(harness.__file__))],
            "excludes": ["__pycache__", "*.pyc"]}


def node_actor(inventory: Inventory, node: Node, *, timeout: float = START_TIMEOUT_S) -> Any:
    """The node's actor, started detached on its Ray node unless it already runs there."""
    ray = ray_module()

    rs = settings(inventory, node)
    connect(str(rs.address), rs.namespace or DEFAULT_NAMESPACE)
    where = find_node(rs, live_nodes())
    how, value = rs.mapping()
    if where is None:
        raise Unreachable(f"no live Ray node has {how} {value} (kvgate ping lists the cluster's nodes)",
                          host=node.name)
    name = ACTOR_PREFIX + node.name
    try:
        actor = ray.get_actor(name)
        if ray.get(actor.where.remote(), timeout=timeout)["node_id"] == where.node_id:
            return actor
        ray.kill(actor, no_restart=True)  # the inventory moved the node: start it where it is now
    except ValueError:
        pass  # no such actor yet
    except ray.exceptions.RayError:
        pass  # a dead one: replaced below
    return _start_actor(name, node, where, rs, timeout)


def _start_actor(name: str, node: Node, where: RayNode, rs: RaySettings, timeout: float) -> Any:
    ray = ray_module()

    from harness.remote.ray.actor import NodeAgent

    cls = ray.remote(NodeAgent)
    for attempt in range(START_ATTEMPTS):
        # get_if_exists: two controllers starting the same node's actor get one actor
        actor = cls.options(name=name, lifetime="detached", get_if_exists=True, num_cpus=0,
                            max_concurrency=ACTOR_THREADS, max_restarts=0,
                            **_placement(rs, where)).remote(node.name)
        try:
            ray.get(actor.where.remote(), timeout=timeout)
            return actor
        except ray.exceptions.GetTimeoutError as exc:
            raise Unreachable(f"the node actor did not start within {timeout:g} s on the Ray node "
                              f"{where.node_id[:12]} ({where.ip})", host=node.name) from exc
        except ray.exceptions.RayActorError as exc:
            # a killed actor holds its name for a moment: the handle we got was the dead one
            if attempt == START_ATTEMPTS - 1:
                raise Unreachable(f"the node actor could not start: {exc}", host=node.name) from exc
            time.sleep(0.5 * (attempt + 1))
        except ray.exceptions.RayError as exc:
            raise Unreachable(f"the node actor could not start: {exc}", host=node.name) from exc
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class MappingReport:
    """Which Ray node each ``connection: ray`` node of an inventory is, as the cluster answers now."""

    mapped: dict[str, RayNode]  # inventory node -> its Ray node
    unmapped: dict[str, str]  # inventory node -> why no Ray node is it ("no live Ray node has resource x")
    unclaimed: list[RayNode]  # live Ray nodes no inventory node claims
    how: dict[str, str]  # inventory node -> "resource kvgate-node:a" (how it names its Ray node)

    def describe(self, node: str) -> Optional[str]:
        """One line for ``kvgate ping``: the mapping and the Ray node it found."""
        if node in self.mapped:
            r = self.mapped[node]
            return f"{self.how[node]} -> {r.node_id[:12]} ({r.ip})"
        if node in self.unmapped:
            return f"{self.how[node]} -> none"
        return None


def mapping_report(inventory: Inventory) -> Optional[MappingReport]:
    """None when no node uses Ray; raises Unreachable when the cluster cannot be joined."""
    ray_nodes = [n for n in inventory.nodes if n.connection == "ray"]
    if not ray_nodes:
        return None
    first = settings(inventory, ray_nodes[0])
    connect(str(first.address), first.namespace or DEFAULT_NAMESPACE)
    live = live_nodes()
    mapped: dict[str, RayNode] = {}
    unmapped: dict[str, str] = {}
    how: dict[str, str] = {}
    for node in ray_nodes:
        rs = settings(inventory, node)
        key, value = rs.mapping()
        how[node.name] = f"{key} {value}"
        found = find_node(rs, live)
        if found is None:
            unmapped[node.name] = f"no live Ray node has {key} {value}"
        else:
            mapped[node.name] = found
    claimed = {r.node_id for r in mapped.values()}
    return MappingReport(mapped, unmapped, [r for r in live if r.node_id not in claimed], how)
