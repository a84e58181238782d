"""Which (node, storage target) pairs a probe runs on: the targets named on the command line or in the
profile, narrowed to a node; a name that matches nothing lists what exists."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from harness.config.inventory import Inventory, Node, StorageTarget
from harness.config.profile import Profile
from harness.errors import InputError


def select_targets(
    inventory: Inventory,
    wanted: Sequence[str] = (),
    *,
    node: Optional[str] = None,
    target: Optional[str] = None,
) -> list[tuple[Node, StorageTarget]]:
    """(node, target) pairs: the targets named in ``wanted`` (all when empty), narrowed to ``node``
    and ``target``. A name that matches nothing is an InputError listing what exists."""
    if node is not None:
        try:
            nodes = [inventory.node(node)]
        except KeyError as exc:
            raise InputError(str(exc.args[0])) from None
    else:
        nodes = list(inventory.nodes)
    names = [target] if target else list(wanted)
    pairs = [(n, t) for n in nodes for t in n.storage if not names or t.name in names]
    known = sorted({t.name for n in nodes for t in n.storage})
    missing = [x for x in names if not any(t.name == x for _, t in pairs)]
    if missing or not pairs:
        where = f"node {node}" if node else "the inventory"
        raise InputError(
            f"storage target(s) {', '.join(missing) or '(any)'} not found on {where}; "
            f"targets: {', '.join(known) or 'none'}"
        )
    return pairs


def storage_for(profile: Profile, explicit: Optional[str], configured: Optional[str]) -> str:
    name = explicit or configured
    if name:
        return name
    try:
        storage = profile.arm(profile.candidate).storage
    except KeyError:
        storage = None
    if not storage:
        raise InputError(
            "no storage target given: pass --target, or set the probe's target in the profile, "
            "or give the candidate arm a 'storage'"
        )
    return storage
