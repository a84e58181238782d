"""The workload fingerprint: canonical, field by field, and sensitive to what makes runs unlike."""

from __future__ import annotations

from pathlib import Path

from harness.config.loader import load_inventory, load_profile
from harness.gates.fingerprint import (
    MISSING,
    fingerprint_diff,
    fingerprint_digest,
    fingerprint_record,
    workload_fingerprint,
)

ROOT = Path(__file__).resolve().parents[2]


def _demo():  # type: ignore[no-untyped-def]
    return load_profile(ROOT / "profiles" / "demo.yaml"), load_inventory(ROOT / "inventory" / "localhost.yaml")


def test_fingerprint_names_what_makes_runs_comparable() -> None:
    prof, inv = _demo()
    fp = workload_fingerprint(prof, arm=prof.baseline, inventory=inv, engine_version="v1")
    for key in ("model.name", "model.geometry.kv_heads", "model.tensor_parallel_size", "model.instances_per_node",
                "engine.kind", "engine.version", "load.workload", "load.input_len", "load.output_len",
                "load.concurrency", "load.prompts_per_point", "load.repetitions", "load.cold_restore", "load.seed",
                "arm.name", "arm.offload", "arm.storage", "engine.sim.prefill_tokens_per_s", "nodes.platforms"):
        assert key in fp, key
    assert fp["engine.version"] == "v1" and fp["load.input_len"] == prof.load.input_len
    assert not any(k.startswith(("overrides", "engine.port", "engine.env")) for k in fp)


def test_digest_is_stable_and_changes_with_any_field() -> None:
    prof, inv = _demo()
    fp = workload_fingerprint(prof, arm=prof.baseline, inventory=inv)
    again = workload_fingerprint(prof, arm=prof.baseline, inventory=inv)
    assert fingerprint_digest(fp) == fingerprint_digest(again) == fingerprint_record(fp)["digest"]
    assert len(fingerprint_digest(fp)) == 64
    assert fingerprint_digest(dict(reversed(list(fp.items())))) == fingerprint_digest(fp)  # key order is irrelevant
    shorter = prof.model_copy(update={"load": prof.load.model_copy(update={"input_len": 256})})
    fp2 = workload_fingerprint(shorter, arm=prof.baseline, inventory=inv)
    assert fingerprint_digest(fp2) != fingerprint_digest(fp)
    assert fingerprint_diff(fp, fp2) == [("load.input_len", prof.load.input_len, 256)]


def test_arms_differ_and_missing_fields_are_named() -> None:
    prof, _ = _demo()
    base = workload_fingerprint(prof, arm=prof.baseline)
    cand = workload_fingerprint(prof, arm=prof.candidate)
    changed = {k for k, _, _ in fingerprint_diff(base, cand)}
    assert "arm.name" in changed and not any(k.startswith(("load.", "model.")) for k in changed)
    assert ("nodes.platforms", MISSING, ["cpu"]) in fingerprint_diff({}, {"nodes.platforms": ["cpu"]})
