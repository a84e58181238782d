"""``kvgate bandwidth-sweep --demo`` (``make demo-bandwidth``): the sweep on this machine, with the KV
emulator over the demo's provisioned local-disk target (``inventory/localhost.yaml``,
``profiles/demo-bandwidth.yaml``), on per-campaign copies of both (``gaterun.demo.per_campaign_inputs``:
its own tier folders and engine port)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from harness.paths import project_root
from harness.pipelines.bandwidth.run import BandwidthOptions, BandwidthOutcome, run_bandwidth_sweep
from harness.pipelines.gaterun.demo import per_campaign_inputs, prepare_local_targets
from harness.store.campaign import check_campaign_name


def run_bandwidth_demo(campaign: str, *, reports_root: Optional[Path] = None, progress: bool = True,
                       inventory: Optional[Path] = None, profile: Optional[Path] = None
                       ) -> tuple[BandwidthOutcome, float]:
    """The demo sweep and its wall time in seconds."""
    root = project_root()
    check_campaign_name(campaign)  # it names folders below
    inv, prof = per_campaign_inputs(campaign, Path(inventory or root / "inventory" / "localhost.yaml"),
                                    Path(profile or root / "profiles" / "demo-bandwidth.yaml"))
    prepare_local_targets(inv)
    t0 = time.monotonic()
    out = run_bandwidth_sweep(inventory_path=inv, profile_path=prof, reports_root=reports_root,
                              options=BandwidthOptions(campaign=campaign, progress=progress,
                                                       gates_path=root / "gates"))
    return out, time.monotonic() - t0
