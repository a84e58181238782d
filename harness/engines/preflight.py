"""Every plan-time check of a profile, as located errors: what ``kvgate plan`` refuses,
``kvgate validate`` refuses with the same message (issue 33 item 11).

The checks, in order: the file's own cross-checks against the inventory (storage targets, the
rules of ``harness.config.planrules``), the declared software against the proven connector wirings
(``harness.engines.connectorwiring``, located at ``engine.versions``), each arm's cold restore
(``coldrestore.cold_restore_plan``) and, with an inventory, the engine plan of every arm and
instance on the first server node (ports, devices, capacity, connectors). An error found by the
engine planner is located at its arm.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from harness.config.crosscheck import check_profile
from harness.config.inventory import Inventory, Node
from harness.config.profile import Profile
from harness.config.yamlsource import YamlDocument, dotted_path
from harness.engines.coldrestore import cold_restore_plan
from harness.engines.connectorwiring import unproven_problems
from harness.engines.registry import get_engine
from harness.errors import ConfigError, InputError


def _at(doc: Optional[YamlDocument], path: str, loc: tuple[object, ...], message: str) -> ConfigError:
    line, col = doc.locate(loc) if doc is not None else (None, None)  # type: ignore[arg-type]
    return ConfigError(message, path=path, line=line, column=col, field=dotted_path(loc) or None)  # type: ignore[arg-type]


def server_and_peers(inventory: Inventory, profile: Profile) -> tuple[Optional[Node], list[Node]]:
    """The node ``kvgate plan`` plans for (the first server) and its Ray peers."""
    servers = inventory.nodes_with_role("server")
    if not servers:
        return None, []
    return servers[0], list(servers[1: profile.model.nodes_per_instance])


def load_client(inventory: Inventory, server: Node) -> Node:
    """The node the load runs on: the server itself when it is a client too (or none is named)."""
    clients = inventory.nodes_with_role("client")
    return server if "client" in server.roles or not clients else clients[0]


def plan_problems(profile: Profile, doc: Optional[YamlDocument], path: str,
                  inventory: Optional[Inventory] = None, *, with_file_checks: bool = True) -> list[ConfigError]:
    """Every reason the profile cannot be planned (empty: it plans)."""
    errors = check_profile(profile, [inventory] if inventory else [], [], doc, path) if with_file_checks else []
    if errors:
        return errors
    errors = [_at(doc, path, ("engine", "versions"), msg) for msg in _unproven(profile, inventory)]
    if errors:
        return errors
    for i, arm in enumerate(profile.arms):
        if profile.load.cold_restore:
            try:
                cold_restore_plan(profile, arm)
            except InputError as exc:
                errors.append(_at(doc, path, ("arms", i, "lmcache"), exc.message))
                continue
        if inventory is None:
            continue
        server, peers = server_and_peers(inventory, profile)
        if server is None:
            continue
        engine = get_engine(profile.engine.kind)
        client = load_client(inventory, server)
        for k in range(profile.model.instances_per_node):
            try:
                plan = engine.plan(server, profile, arm, k, python=str(inventory.setting(server, "python")),
                                   workdir=str(inventory.setting(server, "workdir")), peers=peers)
                plan.url_for(client.name)  # refuses an engine a remote load client cannot reach
            except InputError as exc:
                errors.append(_at(doc, path, ("arms", i), exc.message))
                break
    return errors


def _unproven(profile: Profile, inventory: Optional[Inventory]) -> list[str]:
    """The declared software's combinations that no proven wiring covers, on the inventory's server
    platforms (without an inventory: refused only when no platform has a row)."""
    if profile.engine.kind != "vllm":
        return []
    modes = [arm.lmcache.mode for arm in profile.arms if arm.offload]
    platforms = (list(dict.fromkeys(n.platform for n in inventory.nodes_with_role("server")))
                 if inventory is not None else None)
    return unproven_problems(profile.engine.versions, modes, platforms)


def inventory_for(inventories: Sequence[Inventory]) -> Optional[Inventory]:
    """The inventory a lone ``kvgate validate`` plans against: the only one given, else none."""
    return inventories[0] if len(inventories) == 1 else None
