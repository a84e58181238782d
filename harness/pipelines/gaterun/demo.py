"""The demo: G1 -> G2 -> G3 -> G4 (the soak compressed to 90 seconds) on this machine with the KV
emulator and real fio (no cluster, no GPU). Each run gets its own paths and engine port
(``per_campaign_inputs``): two demos at once both pass."""

from __future__ import annotations

import os
import posixpath
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from harness.config.inventory import CONNECTION_DEFAULTS
from harness.config.loader import load_inventory
from harness.exitcodes import ExitCode
from harness.paths import project_root
from harness.pipelines.gaterun.runner import GateOutcome, run_gate
from harness.pipelines.shared.provisioned import check_enforceable
from harness.ports import free_port
from harness.probes.blkthrottle import ThrottleRefused
from harness.store.campaign import check_campaign_name


@dataclass
class DemoResult:
    outcomes: list[GateOutcome]
    exit_code: ExitCode
    campaign_dir: Optional[Path]
    seconds: float
    gate_seconds: dict[str, float] = field(default_factory=dict)  # wall time per gate run
    raw_disk: Optional[str] = None  # why provisioned rates could not be enforced here (None: they were, or none)


def prepare_local_targets(inventory_path: Path) -> None:
    """Create the directories the local inventory's storage targets name (scratch tiers)."""
    inv = load_inventory(inventory_path)
    for node in inv.nodes:
        if node.connection == "local":
            for target in node.storage:
                if not _is_block_device(target.path):
                    Path(target.path).mkdir(parents=True, exist_ok=True)


def _is_block_device(path: str) -> bool:
    """A raw device target is the node itself; anything else (a /dev/shm memory tier too) is a directory."""
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False


def per_campaign_inputs(campaign: str, inventory: Path, profile: Path) -> tuple[Path, Path]:
    """Copies of the inventory and profile for this demo run, so two demos on one machine never
    share anything: every local node's storage targets and workdir get a ``<campaign>`` subfolder,
    and the engine listens on a free port. Written (and returned) under the first local workdir."""
    inv: dict[str, Any] = yaml.safe_load(inventory.read_text())
    prof: dict[str, Any] = yaml.safe_load(profile.read_text())
    defaults = inv.setdefault("defaults", {}) or {}
    inv["defaults"] = defaults
    base_workdir = str(defaults.get("workdir") or CONNECTION_DEFAULTS["workdir"])
    home = posixpath.join(base_workdir, "demo", campaign)
    for node in inv.get("nodes", []):
        if node.get("connection") != "local":
            continue
        node["workdir"] = posixpath.join(str(node.get("workdir") or base_workdir), "demo", campaign)
        for target in node.get("storage", []):
            if not _is_block_device(str(target["path"])):
                target["path"] = posixpath.join(str(target["path"]), campaign)
    prof.setdefault("engine", {})["port"] = free_port()  # below the ephemeral range: see harness.ports
    Path(home).mkdir(parents=True, exist_ok=True)
    inv_path, prof_path = Path(home) / inventory.name, Path(home) / profile.name
    header = f"# written by kvgate demo for campaign {campaign} from {{}}\n"
    inv_path.write_text(header.format(inventory) + yaml.safe_dump(inv, sort_keys=False))
    prof_path.write_text(header.format(profile) + yaml.safe_dump(prof, sort_keys=False))
    return inv_path, prof_path


def run_demo(campaign: str, *, inventory: Optional[Path] = None, profile: Optional[Path] = None,
             reports_root: Optional[Path] = None, progress: bool = True,
             on_gate: Optional[Callable[[GateOutcome], None]] = None, until: str = "G4") -> DemoResult:
    """Run the gates in order up to ``until`` (G1..G4), stopping at the first that does not pass."""
    root = project_root()
    inventory = inventory or root / "inventory" / "localhost.yaml"
    profile = profile or root / "profiles" / "demo.yaml"
    check_campaign_name(campaign)  # it names folders below
    inventory, profile = per_campaign_inputs(campaign, Path(inventory), Path(profile))
    prepare_local_targets(inventory)
    raw_disk = unenforceable(inventory)
    if raw_disk is not None:
        print(f"kvgate demo: {raw_disk}; running on the raw disk instead, whose rate wanders "
              "(G4 may then be INCONCLUSIVE)", flush=True)
    t0 = time.monotonic()
    outcomes: list[GateOutcome] = []
    code = ExitCode.OK
    gates = ("G1", "G2", "G3", "G4")
    if until not in gates:
        raise ValueError(f"until must be one of {', '.join(gates)}, not {until!r}")
    gate_seconds: dict[str, float] = {}
    for gate in gates[:gates.index(until) + 1]:
        tg = time.monotonic()
        outcome = run_gate(gate, inventory_path=inventory, profile_path=profile, campaign=campaign,
                           reports_root=reports_root, gates_path=root / "gates", progress=progress,
                           # a rehearsal: nobody signed its G2, and G3 says so ("unsigned baseline")
                           allow_unsigned_baseline=True)
        gate_seconds[gate] = time.monotonic() - tg
        if on_gate is not None:
            on_gate(outcome)
        outcomes.append(outcome)
        code = outcome.exit_code
        if code != ExitCode.OK:
            break
    campaign_dir = outcomes[-1].gate_dir.parent if outcomes else None
    return DemoResult(outcomes, code, campaign_dir, time.monotonic() - t0, gate_seconds, raw_disk)


def unenforceable(inventory_path: Path) -> Optional[str]:
    """Why this demo's provisioned rates cannot be enforced on this machine (then the demo's own copy of
    the inventory declares none: it runs on the raw disk, and says so), or None."""
    try:
        check_enforceable(load_inventory(inventory_path))
    except ThrottleRefused as exc:
        data: dict[str, Any] = yaml.safe_load(inventory_path.read_text())
        for node in data.get("nodes", []):
            for target in node.get("storage", []):
                target.pop("provisioned", None)
                target.pop("enforce", None)
        header = inventory_path.read_text().splitlines()[0]
        reason = " ".join(str(exc).split())
        inventory_path.write_text(f"{header} (provisioned rates dropped: {reason})\n"
                                  + yaml.safe_dump(data, sort_keys=False))
        return f"reads cannot be provisioned here ({reason})"
    return None
