"""The G2 baseline check: verified files, fingerprints compared field by field.

These are about files and fingerprints, so they take the rehearsal route (``allow_unsigned``: the
signers are not required, the files and any signature present still are); that an unsigned baseline
is refused by default is tests/integrity/test_custody.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness.config.loader import load_gate
from harness.errors import InputError
from harness.gates.fingerprint import fingerprint_record
from harness.gates.result import build_gate_result
from harness.pipelines.gaterun.baselinecheck import check_baseline
from harness.report.sign import sign, write_manifest
from harness.store.campaign import GateDir

ROOT = Path(__file__).resolve().parents[2]
FP: dict[str, Any] = {"load.input_len": 2048, "load.concurrency": [2], "engine.version": "v1", "arm.name": "baseline"}


def _g2(tmp: Path, fp: dict[str, Any] | None = FP) -> GateDir:
    g2 = GateDir(tmp / "camp" / "G2", "G2")
    res = build_gate_result(load_gate(ROOT / "gates" / "G2.yaml"), [], campaign="camp", started_at="s",
                            fingerprint=fingerprint_record(fp) if fp is not None else None)
    g2.write_result(res)
    (g2.path / "state.jsonl").write_text('{"step": "sweep/baseline/c2/rep1"}\n')
    write_manifest(g2.path)
    return g2


def test_an_unsigned_baseline_is_refused_unless_rehearsing(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not VERIFIED: it carries no signature"):
        check_baseline(_g2(tmp_path), "campaign 'camp'", dict(FP), [])
    chk = check_baseline(_g2(tmp_path / "b"), "campaign 'camp'", dict(FP), [], allow_unsigned=True)
    assert chk.custody["unsigned_baseline"] is True


def test_same_fingerprint_is_accepted(tmp_path: Path) -> None:
    chk = check_baseline(_g2(tmp_path), "campaign 'camp'", dict(FP), [], allow_unsigned=True)
    assert chk.accepted == [] and chk.digest == fingerprint_record(FP)["digest"]


def test_every_differing_field_is_listed_with_both_values(tmp_path: Path) -> None:
    cur = {**FP, "load.input_len": 256, "engine.version": "v2", "arm.storage": "tier"}
    with pytest.raises(InputError) as ei:
        check_baseline(_g2(tmp_path), "campaign 'other'", cur, [], allow_unsigned=True)
    msg = str(ei.value)
    assert "3 workload fingerprint field(s) differ" in msg
    assert "load.input_len: baseline 2048, this run 256" in msg
    assert 'engine.version: baseline "v1", this run "v2"' in msg
    assert 'arm.storage: baseline (not recorded), this run "tier"' in msg
    assert "--allow-baseline-mismatch arm.storage engine.version load.input_len" in msg


def test_named_differences_can_be_accepted_and_are_recorded(tmp_path: Path) -> None:
    cur = {**FP, "engine.version": "v2"}
    chk = check_baseline(_g2(tmp_path), "campaign 'other'", cur, ["engine.version"], allow_unsigned=True)
    assert chk.accepted == [{"field": "engine.version", "baseline": "v1", "this_run": "v2"}]
    assert 'different engine.version: baseline "v1", this run "v2"' in chk.notes()[0]
    with pytest.raises(InputError, match="load.input_len"):  # accepting one field accepts only that one
        check_baseline(_g2(tmp_path / "b"), "x", {**cur, "load.input_len": 1}, ["engine.version"], allow_unsigned=True)
    with pytest.raises(InputError, match="unknown fingerprint field.*load.input_lenn"):
        check_baseline(_g2(tmp_path / "c"), "x", cur, ["load.input_lenn"], allow_unsigned=True)


def test_a_baseline_without_fingerprint_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="without a workload fingerprint"):
        check_baseline(_g2(tmp_path, None), "x", dict(FP), [], allow_unsigned=True)


def test_a_tampered_baseline_is_refused(tmp_path: Path) -> None:
    g2 = _g2(tmp_path)
    state = g2.path / "state.jsonl"
    state.write_text(state.read_text().replace("rep1", "rep2"))
    with pytest.raises(InputError, match=r"failed verification.*state.jsonl changed"):
        check_baseline(g2, "x", dict(FP), [], allow_unsigned=True)
    g2 = _g2(tmp_path / "b")
    (g2.path / "evidence" / "planted.json").write_text("{}")
    with pytest.raises(InputError, match="planted.json added"):
        check_baseline(g2, "x", dict(FP), [], allow_unsigned=True)
    g2 = _g2(tmp_path / "c")
    (g2.path / "MANIFEST.sha256").unlink()
    with pytest.raises(InputError, match="no MANIFEST.sha256"):
        check_baseline(g2, "x", dict(FP), [], allow_unsigned=True)


def test_a_baseline_with_a_broken_signature_is_refused(tmp_path: Path) -> None:
    g2 = _g2(tmp_path)
    key = tmp_path / "k.pem"
    key.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    sig = sign(g2.path, key, "vendor", "vendor")
    assert check_baseline(g2, "x", dict(FP), [], allow_unsigned=True).accepted == []  # signed and intact: fine
    lines = sig.read_text().splitlines()  # one base64 character of the signature changed
    lines[-2] = lines[-2][:-3] + ("A" if lines[-2][-3] != "A" else "B") + lines[-2][-2:]
    sig.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="signature"):
        check_baseline(g2, "x", dict(FP), [], allow_unsigned=True)


def test_a_baseline_with_a_symlink_is_refused(tmp_path: Path) -> None:
    g2 = _g2(tmp_path)
    (g2.path / "evidence" / "link").symlink_to(g2.path / "result.json")
    with pytest.raises(InputError, match=r"evidence/link \(symlink\) is not a regular file"):
        check_baseline(g2, "x", dict(FP), [], allow_unsigned=True)


def test_a_hardware_difference_is_refused_and_accepted_only_by_name(tmp_path: Path) -> None:
    hw = {**FP, "hardware.nodes.accelerators": ["4 x NVIDIA A100-SXM4-80GB"], "kvgate.version": "1.0"}
    cur = {**hw, "hardware.nodes.accelerators": ["8 x NVIDIA H200"]}
    with pytest.raises(InputError) as ei:
        check_baseline(_g2(tmp_path, hw), "campaign 'a100'", cur, [], allow_unsigned=True)
    assert ('hardware.nodes.accelerators: baseline ["4 x NVIDIA A100-SXM4-80GB"], this run ["8 x NVIDIA H200"]'
            in str(ei.value))
    chk = check_baseline(_g2(tmp_path / "b", hw), "campaign 'a100'", cur, ["hardware.nodes.accelerators"],
                         allow_unsigned=True)
    assert chk.record()["accepted_mismatches"] == [{"field": "hardware.nodes.accelerators",
                                                     "baseline": ["4 x NVIDIA A100-SXM4-80GB"],
                                                     "this_run": ["8 x NVIDIA H200"]}]
    assert "different hardware.nodes.accelerators" in chk.notes()[0]
