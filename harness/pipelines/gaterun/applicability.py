"""Which checks have nothing to check for this inventory and profile, and the gate's decision.

A check is NOT_APPLICABLE only for a reason stated here from the inputs themselves: the inventory
expects no accelerators, drives, RAID, capacity, link speed, RoCE or software on any node; the
baseline arm has no storage target (a recompute or CPU-tier arm); the profile has no
checkpoint or model-load probe, or no recompute arm. A check that applies but was not measured
stays NOT_RUN, which never passes. The gate itself is decided by ``harness.gates.verdict.decide``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from harness.config.inventory import Inventory
from harness.config.profile import Profile
from harness.store.schema import CheckResult, Verdict


def _any(flags: Sequence[bool]) -> bool:
    return any(flags)


def not_applicable(gate: str, inventory: Inventory, profile: Profile) -> dict[str, str]:
    """Metric pattern -> why nothing is expected for it."""
    if gate == "G1":
        return _not_applicable_g1(inventory)
    if gate == "G2":
        return _not_applicable_g2(profile)
    if gate == "G3":
        return _not_applicable_g3(profile)
    if gate == "G4":
        return _not_applicable_g4(inventory, profile)
    return {}


def _not_applicable_g1(inventory: Inventory) -> dict[str, str]:
    out: dict[str, str] = {}
    nodes = inventory.nodes
    targets = [t for n in nodes for t in n.storage]
    links = [link for n in nodes for link in n.network]
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
    if not _any([t.provisioned is not None and t.provisioned.read is not None for t in targets]):
        out["nodes.*.storage.*.fio.read_of_provisioned"] = "no storage target declares a provisioned read rate"
    if not targets:
        for p in ("nodes.*.storage.*.mounted", "nodes.*.storage.*.fio.seq_read_bw",
                  "nodes.*.storage.*.fio.seq_write_bw"):
            out[p] = "the inventory has no storage targets"
    return out


def _not_applicable_g2(profile: Profile) -> dict[str, str]:
    out: dict[str, str] = {}
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
        out["baseline.cold_restore.restore_bandwidth_ratio.*"] = why
    if not profile.load.cold_restore:
        out.setdefault("baseline.cold_restore.restore_bandwidth_ratio.*",
                       "no cold restore (load.cold_restore: false): nothing was restored from storage")
    if profile.probes.checkpoint is None:
        out.setdefault("baseline.checkpoint.write_bw", "the profile has no checkpoint probe")
    if profile.probes.modelload is None:
        out.setdefault("baseline.modelload.read_bw", "the profile has no model-load probe")
    return out


def _not_applicable_g3(profile: Profile) -> dict[str, str]:
    out: dict[str, str] = {}
    # A candidate without a storage target is an input error (pipelines.g3.compare.check_g3_inputs), never
    # a reason to skip the storage checks.
    if not profile.load.cold_restore:
        out["candidate.cold_restore.restore_bandwidth_ratio.*"] = (
            "no cold restore (load.cold_restore: false): nothing was restored from storage")
    if profile.load.slo is None:
        out["compare.capacity_gain_at_slo"] = "the profile sets no load.slo"
    if profile.recompute is None:
        out["compare.recompute_speedup.*"] = "the profile has no recompute arm"
        out["recompute.cold_restore.offload_hit_tokens.*"] = "the profile has no recompute arm"
    return out


def _not_applicable_g4(inventory: Inventory, profile: Profile) -> dict[str, str]:
    out: dict[str, str] = {}
    nodes = inventory.nodes
    arm = profile.arm(profile.candidate)
    target = next((t for n in nodes for t in n.storage if t.name == arm.storage), None)
    if profile.model.instances_per_node < 2:
        why = "the soak drives one engine instance: ttft_drift and throughput_drift are its drift"
        out["soak.instance_drift.*.ttft_p50"] = why
        out["soak.instance_drift.*.throughput"] = why
    if target is None:
        out["soak.read_bw_retention"] = f"the candidate arm {arm.name!r} has no storage target"
    if target is None or not (target.drives or target.drive_models or (target.device or "").startswith(
            "/dev/nvme") or any("nvme" in m for m in target.raid_members)):
        out["soak.media_errors_delta"] = "the inventory names no NVMe drive behind the candidate's target"
    if target is None or (target.raid is None and not target.raid_members
                          and not (target.device or "").startswith("/dev/md")):
        out["soak.raid_degraded"] = "the inventory states no RAID behind the candidate's target"
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



def _point_keys(profile: Profile) -> list[str]:
    return [f"c{c}" for c in profile.load.concurrency]


def expected_leaves(gate: str, inventory: Inventory, profile: Profile) -> dict[str, str]:
    """Every concrete leaf a ``*`` check of ``gate`` must see, read from the inputs (never from what
    was measured): path -> what it is. A leaf the pipeline did not produce becomes NOT_RUN
    (:func:`fill_expected`), so a check that saw only part of what it must see does not pass."""
    if gate == "G1":
        return _expected_g1(inventory, profile)
    if gate == "G2":
        return _expected_g2(profile)
    if gate == "G3":
        return _expected_g3(profile)
    return {}


def _expected_g1(inventory: Inventory, profile: Profile) -> dict[str, str]:
    out: dict[str, str] = {}
    only = set(profile.probes.fio.targets)
    for n in inventory.nodes:
        base = f"nodes.{n.name}"
        out[f"{base}.reachable"] = f"node {n.name} answers"
        if n.accelerators is not None:
            out[f"{base}.accelerators.match"] = f"the accelerators of node {n.name}"
        if n.software:
            out[f"{base}.software.match"] = f"the software versions of node {n.name}"
        for t in n.storage:
            tb = f"{base}.storage.{t.name}"
            out[f"{tb}.mounted"] = f"target {t.name} on node {n.name}"
            if t.drives is not None or t.drive_models:
                out[f"{tb}.drives.match"] = f"the drives of target {t.name} on node {n.name}"
            if t.raid is not None or t.raid_members:
                out[f"{tb}.raid.match"] = f"the RAID of target {t.name} on node {n.name}"
            if t.capacity is not None:
                out[f"{tb}.capacity.match"] = f"the capacity of target {t.name} on node {n.name}"
            left_out = bool(only) and t.name not in only
            for k in ("seq_read_bw", "seq_write_bw"):
                out[f"{tb}.fio.{k}"] = (f"fio on target {t.name} of node {n.name}: left out by the profile's "
                                        "probes.fio.targets, so fio did not run on every target"
                                        if left_out else f"fio on target {t.name} of node {n.name}")
            if t.provisioned is not None and t.provisioned.read is not None and not left_out:
                out[f"{tb}.fio.read_of_provisioned"] = f"the read of target {t.name} against its declared rate"
        for link in n.network:
            lb = f"{base}.network.{link.interface}"
            if link.speed is not None:
                out[f"{lb}.speed.match"] = f"the link speed of {link.interface} on node {n.name}"
            if link.roce is not None:
                out[f"{lb}.roce.match"] = f"RoCE on {link.interface} of node {n.name}"
    return out


def _expected_g2(profile: Profile) -> dict[str, str]:
    out: dict[str, str] = {}
    arm = profile.arm(profile.baseline)
    for key in _point_keys(profile):
        out[f"baseline.ttft_p50_cv.{key}"] = f"TTFT repeatability at concurrency {key[1:]}"
        out[f"baseline.throughput_cv.{key}"] = f"throughput repeatability at concurrency {key[1:]}"
        out[f"baseline.cold_restore.engine_prefix_hit_excess.{key}"] = f"eviction at concurrency {key[1:]}"
        if arm.offload:
            out[f"baseline.cold_restore.offload_hit_tokens.{key}"] = f"offload hits at concurrency {key[1:]}"
            out[f"baseline.cold_restore.offload_hit_vs_expected.{key}"] = f"hit share at concurrency {key[1:]}"
            if profile.load.cold_restore:
                out[f"baseline.cold_restore.restore_bandwidth_ratio.{key}"] = (
                    f"restore plausibility at concurrency {key[1:]}")
        out[f"baseline.cold_restore.memory_tier_hit_requests.{key}"] = f"memory-tier hits at concurrency {key[1:]}"
    return out


def _expected_g3(profile: Profile) -> dict[str, str]:
    out: dict[str, str] = {}
    for key in _point_keys(profile):
        c = key[1:]
        out[f"compare.ttft_p50_reduction.{key}"] = f"the TTFT p50 reduction at concurrency {c}"
        out[f"compare.output_divergence.{key}"] = f"the candidate's outputs at concurrency {c}"
        out[f"compare.throughput_gain.{key}"] = f"the throughput gain at concurrency {c}"
        out[f"candidate.cold_restore.offload_hit_tokens.{key}"] = f"candidate offload hits at concurrency {c}"
        out[f"candidate.cold_restore.offload_hit_vs_expected.{key}"] = f"candidate hit share at concurrency {c}"
        out[f"candidate.cold_restore.memory_tier_hit_requests.{key}"] = f"memory-tier hits at concurrency {c}"
        if profile.load.cold_restore:
            out[f"candidate.cold_restore.restore_bandwidth_ratio.{key}"] = f"restore plausibility at c{c}"
        # Also without cold_restore: a gate on storage never passes on prompts the engine kept.
        out[f"candidate.cold_restore.engine_prefix_hit_excess.{key}"] = f"eviction at concurrency {c}"
        if profile.recompute is not None:
            out[f"compare.recompute_speedup.{key}"] = f"the recompute speed-up at concurrency {c}"
            out[f"recompute.cold_restore.offload_hit_tokens.{key}"] = f"recompute offload hits at concurrency {c}"
    return out


def fill_expected(measured: dict[str, Any], expected: dict[str, str]) -> dict[str, Any]:
    """A copy of ``measured`` where every expected leaf that is missing is a NOT_RUN leaf saying
    what was expected (the pipeline's own leaves are kept as they are)."""
    out = copy.deepcopy(measured)
    for path, what in expected.items():
        parts = path.split(".")
        node: Any = out
        for part in parts[:-1]:
            nxt = node.get(part) if isinstance(node, dict) else None
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict) or _is_leaf(nxt):
                node = None
                break
            node = nxt
        if node is None or parts[-1] in node:
            continue
        node[parts[-1]] = {"value": None, "text": "not measured", "evidence": [],
                           "detail": f"expected from the inventory and profile ({what}), not measured"}
    return out


def _is_leaf(d: dict[str, Any]) -> bool:
    return "value" in d or "samples" in d
