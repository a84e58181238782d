"""The inventory of the Ray test session's cluster (``tests/support/raycluster.py``): node ``ray-a``
is the head's resource ``kvgate-node:a``, ``ray-b`` the extra raylet's ``kvgate-node:b``, and
``ray-c`` the head's second resource ``kvgate-node:c``: the soak's own node (its actor is killed
while the other tests run beside it, on the other two)."""

from __future__ import annotations

import json
import os
from typing import Any

from harness.config.inventory import Inventory


def ray_nodes() -> list[dict[str, Any]]:
    return list(json.loads(os.environ["KVGATE_RAY_NODES"]))


def ray_inventory_data(**node_extra: Any) -> dict[str, Any]:
    return {"cluster": "ray-test",
            "defaults": {"connection": "ray", "ray": {"address": os.environ["KVGATE_RAY_ADDRESS"]}},
            "nodes": [{"name": "ray-a", "host": "127.0.0.1", "ray": {"resource": "kvgate-node:a"}, **node_extra},
                      {"name": "ray-b", "host": "127.0.0.1", "ray": {"resource": "kvgate-node:b"}, **node_extra},
                      {"name": "ray-c", "host": "127.0.0.1", "ray": {"resource": "kvgate-node:c"}, **node_extra}]}


def ray_inventory() -> Inventory:
    return Inventory.model_validate(ray_inventory_data())
