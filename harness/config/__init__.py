"""Configuration: pydantic models for inventory, profile and gate files, and their YAML loading."""

from harness.config.gatespec import Check, GateSpec, Statistic
from harness.config.inventory import Inventory, Node, StorageTarget
from harness.config.loader import (
    detect_kind,
    load_any,
    load_gate,
    load_inventory,
    load_model,
    load_profile,
    parse_model,
)
from harness.config.profile import Arm, LoadSpec, Profile

__all__ = [
    "Arm", "Check", "GateSpec", "Inventory", "LoadSpec", "Node", "Profile", "Statistic", "StorageTarget",
    "detect_kind", "load_any", "load_gate", "load_inventory", "load_model", "load_profile", "parse_model",
]
