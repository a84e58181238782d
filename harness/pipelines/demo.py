"""The demo: G1 -> G2 -> G3 on this machine with the KV emulator and real fio (no cluster, no GPU)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from harness.config.loader import load_inventory
from harness.exitcodes import ExitCode
from harness.paths import project_root
from harness.pipelines.gate import GateOutcome, run_gate


@dataclass
class DemoResult:
    outcomes: list[GateOutcome]
    exit_code: ExitCode
    campaign_dir: Optional[Path]
    seconds: float


def prepare_local_targets(inventory_path: Path) -> None:
    """Create the directories the local inventory's storage targets name (scratch tiers)."""
    inv = load_inventory(inventory_path)
    for node in inv.nodes:
        if node.connection == "local":
            for target in node.storage:
                if not target.path.startswith("/dev/"):
                    Path(target.path).mkdir(parents=True, exist_ok=True)


def run_demo(campaign: str, *, inventory: Optional[Path] = None, profile: Optional[Path] = None,
             reports_root: Optional[Path] = None, progress: bool = True,
             on_gate: Optional[Callable[[GateOutcome], None]] = None) -> DemoResult:
    root = project_root()
    inventory = inventory or root / "inventory" / "localhost.yaml"
    profile = profile or root / "profiles" / "demo.yaml"
    prepare_local_targets(inventory)
    t0 = time.monotonic()
    outcomes: list[GateOutcome] = []
    code = ExitCode.OK
    for gate in ("G1", "G2", "G3"):
        outcome = run_gate(gate, inventory_path=inventory, profile_path=profile, campaign=campaign,
                           reports_root=reports_root, gates_path=root / "gates", progress=progress)
        if on_gate is not None:
            on_gate(outcome)
        outcomes.append(outcome)
        code = outcome.exit_code
        if code != ExitCode.OK:
            break
    campaign_dir = outcomes[-1].gate_dir.parent if outcomes else None
    return DemoResult(outcomes, code, campaign_dir, time.monotonic() - t0)
