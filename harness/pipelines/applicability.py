"""Which checks have nothing to check for this inventory and profile, and the gate's decision.

A check is NOT_APPLICABLE only for a reason stated here from the inputs themselves: the inventory
expects no accelerators, drives, RAID, capacity, link speed, RoCE or software on any node; the
baseline arm has no storage target (a recompute or CPU-tier arm); the profile has no
checkpoint or model-load probe, or no recompute arm. A check that applies but was not measured
stays NOT_RUN, which never passes. The gate itself is decided by ``harness.gates.verdict.decide``.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.config.inventory import Inventory
from harness.config.profile import Profile
from harness.store.schema import CheckResult, Verdict


def _any(flags: Sequence[bool]) -> bool:
    return any(flags)


def not_applicable(gate: str, inventory: Inventory, profile: Profile) -> dict[str, str]:
    """Metric pattern -> why nothing is expected for it."""
    out: dict[str, str] = {}
    nodes = inventory.nodes
    targets = [t for n in nodes for t in n.storage]
    links = [link for n in nodes for link in n.network]
    if gate == "G1":
        if not _any([n.accelerators is not None for n in nodes]):
            out["nodes.*.accelerators.match"] = "the inventory expects no accelerators on any node"
        if not _any([t.drives is not None or bool(t.drive_models) for t in targets]):
            out["nodes.*.storage.*.drives.match"] = "no storage target states its drives"
        if not _any([t.raid is not None or bool(t.raid_members) for t in targets]):
            out["nodes.*.storage.*.raid.match"] = "no storage target states a RAID level"
        if not _any([t.capacity is not None for t in targets]):
            out["nodes.*.storage.*.capacity.match"] = "no storage target states a capacity"
        if not _any([link.speed is not None for link in links]):
            out["nodes.*.network.*.speed.match"] = "the inventory expects no network link speed"
        if not _any([link.roce is not None for link in links]):
            out["nodes.*.network.*.roce.match"] = "the inventory expects no RoCE link"
        if not _any([bool(n.software) for n in nodes]):
            out["nodes.*.software.match"] = "the inventory names no software versions"
        if not targets:
            for p in ("nodes.*.storage.*.mounted", "nodes.*.storage.*.fio.seq_read_bw",
                      "nodes.*.storage.*.fio.seq_write_bw"):
                out[p] = "the inventory has no storage targets"
    elif gate == "G2":
        arm = profile.arm(profile.baseline)
        if arm.storage is None:
            tier = "no KV offload" if not arm.offload else "CPU or remote tier"
            why = f"the baseline arm {arm.name!r} has no storage target ({tier})"
            for p in ("baseline.fio.seq_read_bw", "baseline.checkpoint.write_bw", "baseline.modelload.read_bw"):
                out[p] = why
        if not arm.offload:
            why = f"the baseline arm {arm.name!r} offloads no KV (offload: false)"
            out["baseline.cold_restore.offload_hit_tokens.*"] = why
            out["baseline.cold_restore.offload_hit_vs_expected.*"] = why
        if not profile.load.cold_restore:
            out["baseline.cold_restore.engine_prefix_hit_excess.*"] = "the profile turns cold restore off"
        if profile.probes.checkpoint is None:
            out.setdefault("baseline.checkpoint.write_bw", "the profile has no checkpoint probe")
        if profile.probes.modelload is None:
            out.setdefault("baseline.modelload.read_bw", "the profile has no model-load probe")
    elif gate == "G3":
        # A candidate without a storage target is an input error (pipelines.g3.check_g3_inputs), never
        # a reason to skip the storage checks.
        if profile.recompute is None:
            out["compare.recompute_speedup.*"] = "the profile has no recompute arm"
            out["recompute.cold_restore.offload_hit_tokens.*"] = "the profile has no recompute arm"
        if not profile.load.cold_restore:
            out["candidate.cold_restore.engine_prefix_hit_excess.*"] = "the profile turns cold restore off"
    return out


def mark_not_applicable(checks: Sequence[CheckResult], reasons: dict[str, str]) -> list[CheckResult]:
    """NOT_RUN checks whose metric has a stated reason become NOT_APPLICABLE, with that reason.
    A check that did measure something keeps its verdict."""
    out = []
    for c in checks:
        why = reasons.get(c.metric)
        measured_any = any(o.measured is not None for o in c.observations)
        if why and c.verdict is Verdict.NOT_RUN and not measured_any:
            obs = [o.model_copy(update={"verdict": Verdict.NOT_APPLICABLE, "reason": why}) for o in c.observations]
            c = c.model_copy(update={"verdict": Verdict.NOT_APPLICABLE, "reason": why, "observations": obs})
        out.append(c)
    return out

