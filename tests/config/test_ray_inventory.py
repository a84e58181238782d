"""``connection: ray`` in the inventory: defaults, the node mapping, and what `kvgate validate` refuses."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from harness.config.crosscheck import check_inventory
from harness.config.inventory import Inventory


def _inv(nodes: list[dict[str, Any]], **defaults: Any) -> Inventory:
    return Inventory.model_validate({"cluster": "c", "defaults": defaults, "nodes": nodes})


def test_defaults_connection_and_mapping() -> None:
    inv = _inv([{"name": "a", "host": "10.0.0.11"},
                {"name": "b", "host": "10.0.0.12", "ray": {"resource": "kvgate-node:b"}},
                {"name": "c", "host": "10.0.0.13", "connection": "ssh"}],
               connection="ray", ray={"address": "10.0.0.1:6379"})
    assert [n.connection for n in inv.nodes] == ["ray", "ray", "ssh"]
    assert inv.ray_settings(inv.node("a")).mapping() == ("node_ip", "10.0.0.11")  # the host, by default
    b = inv.ray_settings(inv.node("b"))
    assert b.mapping() == ("resource", "kvgate-node:b") and b.address == "10.0.0.1:6379"
    assert check_inventory(inv) == []


def test_validate_refuses_what_would_misroute() -> None:
    inv = _inv([{"name": "a", "host": "h", "connection": "ray", "ray": {"node_id": "ab12cd34ef"}},
                {"name": "b", "host": "h", "connection": "ray", "ray": {"node_id": "ab12cd34ef"}},
                {"name": "c", "host": "h", "ray": {"resource": "x"}}],
               ray={"address": "10.0.0.1:6379"})
    errors = [e.args[0] for e in check_inventory(inv)]
    assert any("nodes a and b both claim the Ray node with node_id ab12cd34ef" in e for e in errors)
    assert any("node c: `ray` is set but its connection is ssh" in e for e in errors)
    no_address = _inv([{"name": "a", "host": "h", "connection": "ray"}])
    assert any("no cluster address" in e.args[0] for e in check_inventory(no_address))


@pytest.mark.parametrize("bad", [
    {"ray": {"address": "10.0.0.1:6379", "resource": "x"}},  # a node's mapping under defaults
    {"nodes_ray": {"resource": "x", "node_id": "ab12cd34ef"}},  # two mappings at once
    {"ray": {"address": "not an address"}},
])
def test_bad_ray_settings_are_refused(bad: dict[str, Any]) -> None:
    node: dict[str, Any] = {"name": "a", "host": "h", "connection": "ray"}
    if "nodes_ray" in bad:
        node["ray"] = bad.pop("nodes_ray")
    with pytest.raises(ValidationError):
        _inv([node], **bad)
