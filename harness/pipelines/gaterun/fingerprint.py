"""The run fingerprint of a G2 or G3 (the workload fields of ``harness.gates.fingerprint`` plus the
hardware fields of ``harness.gates.hardware``), from the campaign's G1 facts: G2 and G3 run only in
a campaign whose G1 passed, and G1 is where kvgate collects what each node is."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from harness import __version__
from harness.config.inventory import Inventory
from harness.config.profile import Profile
from harness.facts.model import NodeFacts
from harness.gates.fingerprint import workload_fingerprint
from harness.gates.hardware import hardware_fingerprint

__all__ = ["run_fingerprint", "engine_version", "recorded_versions", "g1_facts", "software_fingerprint"]

log = logging.getLogger(__name__)


def _facts_dir(campaign_path: Path) -> Path:
    return campaign_path / "G1" / "evidence" / "facts"


def _read_json(path: Path) -> Optional[dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def g1_facts(inventory: Inventory, campaign_path: Path) -> dict[str, Optional[NodeFacts]]:
    """Each node's facts as the campaign's G1 recorded them; None where G1 has none readable (the
    hardware fields are then not collected, never guessed)."""
    out: dict[str, Optional[NodeFacts]] = {}
    for node in inventory.nodes:
        data = _read_json(_facts_dir(campaign_path) / f"{node.name}.json")
        try:
            out[node.name] = NodeFacts.model_validate(data) if data is not None else None
        except ValidationError as exc:
            log.warning("G1 facts of %s are not readable as facts: %s", node.name, exc.errors()[:1])
            out[node.name] = None
    return out


def recorded_versions(inventory: Inventory, campaign_path: Path) -> dict[str, dict[str, str]]:
    """Software versions from the campaign's G1 facts, when G1 ran."""
    out: dict[str, dict[str, str]] = {}
    for node in inventory.nodes:
        data = _read_json(_facts_dir(campaign_path) / f"{node.name}.json")
        if data is not None:
            out[node.name] = {k: v for k, v in (data.get("versions") or {}).items() if v}
    return out


def engine_version(profile: Profile, inventory: Inventory, campaign_path: Path) -> Optional[str]:
    """The engine version that goes into the workload fingerprint: the emulator's own version, or
    the vLLM version(s) G1 found on the serving nodes (None when G1 recorded none)."""
    if profile.engine.kind == "sim":
        return f"kvgate KV emulator {__version__}"
    versions = recorded_versions(inventory, campaign_path)
    found = sorted({v["vllm"] for v in versions.values() if v.get("vllm")})
    return ", ".join(found) or None


# the serving stack whose figures a G3 compares: engine, KV connector, framework and drivers (issue 48)
STACK_SOFTWARE = ("vllm", "vllm-ascend", "lmcache", "torch", "torch-npu", "rocm", "cuda", "nvidia-driver", "cann",
                  "npu-driver")


def software_fingerprint(profile: Profile, inventory: Inventory, campaign_path: Path) -> dict[str, Any]:
    """``software.<name>``: the versions G1 read on the serving nodes (sorted, distinct; "absent"
    where a node has none), so a G3 never compares figures of unlike stacks. None for the emulator,
    whose version is kvgate's own (``engine.version``)."""
    if profile.engine.kind == "sim":
        return {}
    versions = recorded_versions(inventory, campaign_path)
    serving = [n.name for n in inventory.nodes_with_role("server")]
    out: dict[str, Any] = {}
    for name in STACK_SOFTWARE:
        found = sorted({versions.get(node, {}).get(name) or "absent" for node in serving})
        if found != ["absent"]:
            out[f"software.{name}"] = found
    return out


def run_fingerprint(profile: Profile, *, arm: str, inventory: Inventory, campaign_path: Path) -> dict[str, Any]:
    """The fields a G2 records for its baseline arm and a G3 computes for the same arm to compare."""
    out = workload_fingerprint(profile, arm=arm, inventory=inventory,
                               engine_version=engine_version(profile, inventory, campaign_path))
    out.update(software_fingerprint(profile, inventory, campaign_path))
    out.update(hardware_fingerprint(inventory, g1_facts(inventory, campaign_path),
                                    storage=profile.arm(arm).storage, kvgate_version=__version__))
    return out
