"""The controller's side of a Ray cluster: connect once, list its nodes, name the Ray node of each
inventory node, and start (or find) the node actors.

A node actor is a *detached*, named actor (``kvgate-node-<node>-<random token>`` in the
inventory's namespace, ``kvgate`` by default): it outlives the controller that started it, and a
controller started later finds it through the record of the actors kvgate created
(``actorbook``: the run's own, or the controller's), by name, accepted only with the recorded
ActorID; an actor under a name kvgate uses that it did not create is refused (``ForeignActor``,
exit 4). It is pinned to its Ray node: by a custom resource (a small share of it, so a node's
resource of 1 carries many actors) or by node affinity (not soft) for a node id or IP. An actor
found on another Ray node than the inventory now names is replaced. Actors take no CPU
(``num_cpus=0``): they wait on processes. The trust boundary: docs/ARCHITECTURE.md, "The Ray
executor".
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from harness.errors import InputError
from harness.remote.base import ConnectionLost, RemoteError, Unreachable
from harness.remote.ray import replies
from harness.remote.ray.actorbook import ActorBook, ActorRecord, book_key, controller_book
from harness.remote.ray.classguard import ForeignActorClass, guard

if TYPE_CHECKING:
    from harness.config.inventory import Inventory, Node, RaySettings

DEFAULT_NAMESPACE = "kvgate"
ACTOR_PREFIX = "kvgate-node-"
ACTOR_THREADS = 64  # commands one node actor runs at once
RESOURCE_SHARE = 0.001  # of a mapping resource per actor
# A new actor is a new worker process (and kvgate's package unpacked on its node); a raylet starts
# them a few at a time (as many as it has CPUs): 32 at once took over 60 s on a loaded 2-core node.
START_TIMEOUT_S = 300.0
_lock = threading.Lock()
_connected: Optional[tuple[str, str]] = None
_node_locks: dict[str, threading.Lock] = {}


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
        guard(ray)  # before any actor is looked up: no class is ever loaded from the cluster
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


class ForeignActor(RemoteError):
    """An actor under a name kvgate uses that kvgate did not create (refused, never called)."""


def node_actor(inventory: Inventory, node: Node, *, book: Optional[ActorBook] = None,
               timeout: float = START_TIMEOUT_S) -> Any:
    """The node's actor: the one ``book`` records (its ActorID checked) when it still runs on the
    node's Ray node, else a new one, started detached under a fresh unguessable name and recorded."""
    rs = settings(inventory, node)
    namespace = rs.namespace or DEFAULT_NAMESPACE
    connect(str(rs.address), namespace)
    where = find_node(rs, live_nodes())
    how, value = rs.mapping()
    if where is None:
        raise Unreachable(f"no live Ray node has {how} {value} (kvgate ping lists the cluster's nodes)",
                          host=node.name)
    book = book if book is not None else controller_book()
    key = book_key(str(rs.address), namespace, node.name)
    with _lock:
        node_lock = _node_locks.setdefault(f"{book.path} {key}", threading.Lock())
    with node_lock:  # two executors of one node in this process start one actor, not two
        record = book.recall(key)
        if record is not None:
            actor = _reattach(record, namespace, node.name, where, timeout)
            if actor is not None:
                return actor
        return _start_actor(node, where, rs, timeout, book, key)


def _reattach(record: ActorRecord, namespace: str, node: str, where: RayNode, timeout: float) -> Any:
    """The recorded actor when it is alive on ``where``; None when it is gone (or was on another Ray
    node: killed, to start where the inventory now says). An actor of that name with another
    ActorID, or of a class not kvgate's, is refused."""
    ray = ray_module()
    guard(ray)
    try:
        actor = ray.get_actor(record.name)  # its class from kvgate's own code only (classguard)
    except ValueError:
        return None  # no such actor now: it died
    except ForeignActorClass as exc:
        raise ForeignActor(f"the Ray actor {record.name} (namespace {namespace}) is not the one kvgate created "
                           f"(actor id {record.actor_id} recorded): {exc.args[0].split(': ', 1)[-1]}; refused",
                           host=node) from None
    found = actor._actor_id.hex()
    if found != record.actor_id:
        raise ForeignActor(f"the Ray actor {record.name} (namespace {namespace}) has actor id {found}, not the "
                           f"{record.actor_id} kvgate recorded when it created it: another user of the cluster "
                           "holds the name; refused (not called)", host=node)
    try:
        if _where(actor, node, timeout)["node_id"] == where.node_id:
            return actor
    except ConnectionLost:
        return None  # dead, its name not yet released
    except ray.exceptions.GetTimeoutError as exc:
        raise Unreachable(f"the node actor {record.name} did not answer within {timeout:g} s", host=node) from exc
    ray.kill(actor, no_restart=True)  # the inventory moved the node: start it where it is now
    return None


def _where(actor: Any, node: str, timeout: float) -> dict[str, Any]:
    """The actor's ``where()`` reply, its shape checked (``MalformedReply`` otherwise)."""
    what = "a look at the node actor (where)"
    got = replies.decode(replies.fetch(actor.where.remote(), timeout, node=node, what=what), node=node, what=what)
    replies.need(isinstance(got, dict) and isinstance(got.get("node_id"), str) and bool(got["node_id"]),
                 node=node, what=what, expected='an object with a "node_id" string')
    return dict(got)


def _start_actor(node: Node, where: RayNode, rs: RaySettings, timeout: float, book: ActorBook, key: str) -> Any:
    ray = ray_module()

    from harness.remote.ray.actor import NodeAgent

    name = f"{ACTOR_PREFIX}{node.name}-{secrets.token_hex(16)}"
    try:
        actor = ray.remote(NodeAgent).options(
            name=name, lifetime="detached", num_cpus=0, max_concurrency=ACTOR_THREADS, max_restarts=0,
            **_placement(rs, where)).remote(node.name)
    except ValueError as exc:  # the name is taken: never ours, its token is drawn just now
        raise ForeignActor(f"a Ray actor named {name} (namespace {rs.namespace or DEFAULT_NAMESPACE}) already "
                           f"exists and kvgate did not create it; refused ({exc})", host=node.name) from None
    book.remember(key, ActorRecord(name, actor._actor_id.hex()))
    try:
        _where(actor, node.name, timeout)
    except ray.exceptions.GetTimeoutError as exc:
        raise Unreachable(f"the node actor did not start within {timeout:g} s on the Ray node "
                          f"{where.node_id[:12]} ({where.ip})", host=node.name) from exc
    except ConnectionLost as exc:
        raise Unreachable(f"the node actor could not start: {exc.args[0].split(': ', 1)[-1]}",
                          host=node.name) from exc
    return actor


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
