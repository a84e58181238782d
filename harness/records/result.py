"""The result file of a gate (``reports/<campaign>/<gate>/result.json``), schema version 1.

This is the contract between the gate engine (which writes it) and the reports (which are
rendered from it alone). Result files carry ``schema_version`` from day one; a reader refuses a
version it does not know instead of guessing.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from harness.records.outcome import CheckResult, Verdict

SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GateResult(_Model):
    schema_version: int = SCHEMA_VERSION
    gate: str
    title: str
    campaign: str
    verdict: Verdict = Field(description="PASS only when every blocker check passed")
    exit_code: int
    verdict_reason: str = Field(default="", description="Why the gate got its verdict (harness.gates.verdict)")
    started_at: str
    finished_at: str
    kvgate_version: str
    git_commit: Optional[str] = None
    operator: Optional[str] = None
    inventory: dict[str, Any] = Field(default_factory=dict, description="cluster, nodes, platforms")
    profile: dict[str, Any] = Field(default_factory=dict, description="name, model, engine, arms")
    emulated: bool = Field(default=False, description="Compute was emulated (kvgate sim)")
    checks: list[CheckResult] = Field(default_factory=list)
    measurements: dict[str, Any] = Field(default_factory=dict, description="Measured values for charts/tables")
    faults: list[str] = Field(default_factory=list, description="Infrastructure faults recorded as evidence")
    fingerprint: Optional[dict[str, Any]] = Field(
        default=None, description="Workload fingerprint {digest, fields} (harness.gates.fingerprint); G2: the "
        "baseline arm, G3: the candidate arm")
    baseline: Optional[dict[str, Any]] = Field(
        default=None, description="G3: the G2 baseline used {where, digest, accepted_mismatches, campaign, gate, "
        "manifest_sha256, signers, verified, unsigned_baseline} (harness.pipelines.gaterun.baselinecheck)")
    gate_files: list[dict[str, Any]] = Field(
        default_factory=list, description="Each gate file the result was decided by {gate, path, sha256, stock, "
        "stock_sha256, differences} (harness.gates.gatefile)")
    notes: list[str] = Field(default_factory=list)
    custody: Optional[dict[str, Any]] = Field(
        default=None, description="Which run of which campaign wrote this result {campaign_id, run_id, resumed, "
        "memory_tiers, earlier_runs: [{run_id, verdict, started_at, finished_at, resumed}]} (harness.store.journal)")
