"""Which cold restore is valid for an arm, decided from the profile before any node is touched.

A cold restore empties everything above the tier under test without losing what that tier holds:
- vLLM's HBM prefix cache: ``POST /reset_prefix_cache`` (served only with VLLM_SERVER_DEV_MODE=1,
  which kvgate sets when ``engine.dev_mode``), verified by a re-sent cached prompt finding 0
  prefix-cache hits; else a restart of vLLM.
- LMCache multiprocess mode: the server's L1 is cleared through its HTTP API
  (``POST /cache/clear``); its L2 (fs_native on the storage target) keeps its files and finds
  them after a restart.
- LMCache in-process mode: its local-disk backend keeps its index in the engine's memory only (no
  directory scan at start), so a restart of vLLM loses the disk tier. Valid only when no restart
  is needed (no CPU tier and the reset endpoint served) or when the tier under test is remote or
  LMCache's GDS backend (which rescans its directory at start).
Where no safe way exists the plan refuses (``UnsafeColdRestore``), naming why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from harness.config.profile import Arm, Profile
from harness.engines.base import SidecarPlan
from harness.errors import InputError


class UnsafeColdRestore(InputError):
    """The arm's cold restore would empty the tier under test (both arms would recompute)."""


@dataclass(frozen=True)
class ColdRestorePlan:
    arm: str
    mode: str  # "none" (recompute arm), "in_process", "multiprocess", "sim"
    steps: tuple[str, ...]  # in order, as kvgate runs them
    restarts_engine: bool

    def to_json(self) -> dict[str, object]:
        return {"arm": self.arm, "mode": self.mode, "steps": list(self.steps),
                "restarts_engine": self.restarts_engine}

    def with_sidecar(self, sidecar: Optional[SidecarPlan]) -> ColdRestorePlan:
        """The steps with the L1 clear as the planned LMCache server takes it (its release's call)."""
        if sidecar is None:
            return self
        step = l1_clear_step(sidecar.l1_clear_path, sidecar.l1_clear_body)
        return replace(self, steps=tuple(step if s == L1_CLEAR else s for s in self.steps))


RESET = "vLLM POST /reset_prefix_cache (VLLM_SERVER_DEV_MODE=1), verified: a re-sent cached prompt gets 0 prefix hits"
RESTART = "restart vLLM (empties its HBM prefix cache)"
L1_CLEAR = "LMCache server POST /cache/clear {\"tier\": \"l1\"} (L2 files on the storage target kept)"
DROP = "drop the node's page cache (root only; recorded)"


def l1_clear_step(path: str, body: str) -> str:
    """The L1 step as the plan's LMCache release takes it (lmcache 0.4: POST /clear-cache, no body)."""
    return f"LMCache server POST {path}{' ' + body if body else ''} (L2 files on the storage target kept)"


def cold_restore_plan(profile: Profile, arm: Arm) -> ColdRestorePlan:
    """The steps of ``arm``'s cold restore, or UnsafeColdRestore when none keeps the tier."""
    dev = profile.engine.dev_mode
    if profile.engine.kind == "sim" and not (arm.offload and arm.lmcache.mode == "multiprocess"):
        return ColdRestorePlan(arm.name, "sim", ("emulator POST /kvgate/evict (HBM and CPU tiers)", DROP), False)
    vllm_step = RESET if dev else RESTART
    if not arm.offload:
        return ColdRestorePlan(arm.name, "none", (vllm_step, DROP), not dev)
    lm = arm.lmcache
    if lm.mode == "multiprocess":
        if lm.mp_l2 == "none" and not lm.remote_url:
            raise UnsafeColdRestore(
                f"arm {arm.name!r}: LMCache multiprocess mode without an L2 tier keeps KV in its L1 only, "
                "which the cold restore clears: the measurement would be recompute. Set lmcache.mp_l2: fs_native"
            )
        return ColdRestorePlan(arm.name, "multiprocess", (vllm_step, L1_CLEAR, DROP), not dev)
    if lm.remote_url or lm.gds_on:
        # a remote tier lives outside the engine; the GDS backend rescans its directory at start
        # (lmcache 0.5.6 gds_backend.py _scan_metadata): both keep what they hold across a restart
        return ColdRestorePlan(arm.name, "in_process", (RESTART, DROP), True)
    if lm.local_cpu:
        raise UnsafeColdRestore(
            f"arm {arm.name!r}: LMCache in-process mode with a CPU tier needs an engine restart to empty it, "
            "and a restart loses the local-disk index (kept in the engine's memory only): the restored "
            "measurement would be recompute. Use lmcache.mode: multiprocess (L2 fs_native survives) or a "
            "remote tier"
        )
    if not dev:
        raise UnsafeColdRestore(
            f"arm {arm.name!r}: LMCache in-process mode keeps its disk index in the engine's memory; without "
            "engine.dev_mode the prefix cache can only be emptied by a restart, which loses that index. "
            "Set engine.dev_mode: true or use lmcache.mode: multiprocess"
        )
    return ColdRestorePlan(arm.name, "in_process", (RESET, DROP), False)


def check_profile(profile: Profile) -> list[ColdRestorePlan]:
    """Every arm's cold restore when the profile asks for one (raises on the first unsafe arm)."""
    if not profile.load.cold_restore:
        return []
    return [cold_restore_plan(profile, arm) for arm in profile.arms]


# Settings that must match between baseline and candidate for the comparison to be of the storage
# alone (sizes of the tier under test and the target itself may differ).
LIKE_FOR_LIKE = ("mode", "chunk_size", "local_cpu", "max_local_cpu_size", "mp_l1_size_gb", "mp_l2",
                 "save_unfull_chunk", "enable_async_loading", "cache_policy")


def unlike_settings(profile: Profile) -> list[str]:
    """How the baseline and candidate arms differ beyond their storage (empty: like for like).
    ``extra_config.use_odirect`` counts: O_DIRECT on one arm only compares page-cache behaviour."""
    try:
        base, cand = profile.arm(profile.baseline), profile.arm(profile.candidate)
    except KeyError:
        return []
    if not (base.offload and cand.offload):
        return []
    out = []
    for key in LIKE_FOR_LIKE:
        a, b = getattr(base.lmcache, key), getattr(cand.lmcache, key)
        if a != b:
            out.append(f"lmcache.{key}: {base.name} {a!r} vs {cand.name} {b!r}")
    a_od, b_od = base.lmcache.extra_config.get("use_odirect"), cand.lmcache.extra_config.get("use_odirect")
    if bool(a_od) != bool(b_od):
        out.append(f"lmcache.extra_config.use_odirect: {base.name} {a_od!r} vs {cand.name} {b_od!r}")
    return out
