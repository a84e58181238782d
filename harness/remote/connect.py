"""``executor_for``: the right Executor for a node of an inventory."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from harness.config.inventory import Inventory
from harness.errors import InputError
from harness.remote.base import Executor
from harness.remote.local import LocalExecutor


def executor_for(inventory: Inventory, node_name: str, *, accept_new_host_keys: bool = False,
                 cgroup: Optional[str] = None, ray_actors: Optional[Path] = None) -> Executor:
    """A LocalExecutor for ``connection: local`` nodes, a RayExecutor (its node actor started on the first
    command) for ``connection: ray``, else an SSHExecutor (connected lazily, on the first command).
    ``accept_new_host_keys`` is the explicit trust-on-first-use opt-in (it adds to the inventory's own
    ``accept_new_host_keys`` setting, never removes it). ``cgroup``: the ``cgroup.procs`` file of a
    cgroup every command and detached process then starts in (``harness.remote.cgroupjoin``).
    ``ray_actors``: the file where a run records the Ray node actors it creates
    (``harness.remote.ray.actorbook``; default the controller's own)."""
    made = _executor(inventory, node_name, accept_new_host_keys, ray_actors)
    if cgroup is None:
        return made
    from harness.remote.cgroupjoin import CgroupExecutor

    return CgroupExecutor(made, cgroup)


def _executor(inventory: Inventory, node_name: str, accept_new_host_keys: bool,
              ray_actors: Optional[Path]) -> Executor:
    try:
        node = inventory.node(node_name)
    except KeyError as exc:
        raise InputError(str(exc.args[0])) from exc
    if node.connection == "local":
        timeout = inventory.setting(node, "command_timeout")
        return LocalExecutor(node.name, default_timeout=float(timeout) if timeout is not None else None)  # type: ignore[arg-type]
    if node.connection == "ray":
        from harness.remote.ray.actorbook import ActorBook
        from harness.remote.ray.executor import RayExecutor  # Ray is only imported when an inventory uses it

        return RayExecutor.from_inventory(inventory, node_name,
                                          book=ActorBook(ray_actors) if ray_actors is not None else None)
    from harness.remote.ssh import SSHExecutor  # paramiko is only imported when SSH is used

    return SSHExecutor.from_inventory(inventory, node_name, accept_new_host_keys=accept_new_host_keys)
