"""Is the G2 baseline usable by this G3 run? Checked before any node is touched.

1. The baseline gate directory is verified against its ``MANIFEST.sha256`` (every file as
   written, nothing missing, nothing added) and every signature in it must be valid: a tampered
   baseline is refused. A manifest anyone can regenerate proves nothing, so by default the
   baseline must also be VERIFIED: every required role (vendor, customer) signed by a different
   key the trust anchors (``allowed_signers``, from the inventory or ``--allowed-signers``) bind
   to that role. ``--allow-unsigned-baseline`` (rehearsals) accepts an unverified one, and the
   result records it as an *unsigned baseline* that every report and ``kvgate verify`` show.
   Either way the result records which baseline was used: its campaign and gate, the sha256 of
   its ``MANIFEST.sha256`` and the key fingerprints of its valid signatures.
2. Its recorded workload fingerprint (``harness.gates.fingerprint``) must equal the one this run
   computes for the same arm from its own inventory and profile. Every differing field is listed
   with both values; the user may accept named fields (``--allow-baseline-mismatch FIELD``), and
   the accepted differences are recorded in ``result.json`` and the report's notes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from harness.errors import InputError
from harness.gates.fingerprint import MISSING, fingerprint_diff
from harness.report.manifest import read_regular
from harness.report.sign import MANIFEST, ROLES, VerifyReport, verify
from harness.report.trust import Anchor
from harness.store.campaign import GateDir

__all__ = ["BaselineCheck", "check_baseline", "check_campaign_id", "check_standing"]


@dataclass
class BaselineCheck:
    """What was checked and accepted about the baseline (recorded in G3's result.json)."""

    where: str
    digest: str
    accepted: list[dict[str, Any]] = field(default_factory=list)
    custody: dict[str, Any] = field(default_factory=dict)  # see custody_record

    def record(self) -> dict[str, Any]:
        return {"where": self.where, "digest": self.digest, "accepted_mismatches": list(self.accepted),
                **self.custody}

    def notes(self) -> list[str]:
        out = [f"baseline accepted with a different {a['field']}: baseline {json.dumps(a['baseline'])}, "
               f"this run {json.dumps(a['this_run'])} (--allow-baseline-mismatch)" for a in self.accepted]
        if self.custody.get("unsigned_baseline"):
            out.append(f"UNSIGNED BASELINE: the G2 baseline of {self.where} was not verified "
                       f"({self.custody.get('unverified_reason')}); accepted with --allow-unsigned-baseline")
        return out


def verify_gate_dir(g2: GateDir, where: str, anchors: Optional[Sequence[Anchor]] = None) -> VerifyReport:
    """Refuse a baseline whose files differ from its manifest or whose signatures are bad."""
    rep = verify(g2.path, anchors=anchors, roles=ROLES)
    bad = _verification_problems(rep, "")
    bad += [f"{p} added after the manifest was written" for p in rep.extra]
    if bad:
        raise InputError(f"the G2 baseline of {where} ({g2.path}) failed verification, refusing to compare "
                         f"against it: {'; '.join(bad)}")
    return rep


def _verification_problems(rep: VerifyReport, prefix: str) -> list[str]:
    """What keeps a gate directory from being as its manifest says, each file named as
    ``prefix`` + its path (extra files are the caller's to judge)."""
    missing = f"{prefix}{MANIFEST} is missing" if prefix else f"it has no {MANIFEST}"
    bad: list[str] = [] if rep.manifest_present else [missing]
    bad += rep.problems
    bad += [f"{prefix}{p} changed since {MANIFEST} was written" for p in rep.changed]
    bad += [f"{prefix}{p} missing" for p in rep.missing]
    bad += [f"{prefix}{p} is not a regular file or directory" for p in rep.refused]
    bad += [f"{prefix}{s.file}: {s.reason}" for s in rep.signatures if not s.valid]
    return bad


def _unverified_reason(rep: VerifyReport) -> str:
    if not rep.signatures:
        return "it carries no signature"
    if not rep.anchors_given:
        return "no trust anchors were given (allowed_signers)"
    untrusted = [f"{s.file}: {s.trust_reason}" for s in rep.signatures if s.valid and s.trusted is False]
    missing = [f"no signature of the {r} by a key trusted for it" for r in rep.missing_roles]
    return "; ".join(missing + untrusted) or rep.status


def custody_record(g2: GateDir, rep: VerifyReport, campaign: str) -> dict[str, Any]:
    """What pins the baseline in G3's result: its campaign and gate, the sha256 of its manifest
    (what every signature signed), the key fingerprints of its valid signatures, and whether it
    was VERIFIED (or used unverified with --allow-unsigned-baseline)."""
    manifest = read_regular(g2.path / MANIFEST)
    signers = [{"file": s.file, "role": s.role, "signer_id": s.signer_id, "fingerprint": s.fingerprint,
                "trusted": bool(s.trusted)} for s in rep.signatures if s.valid]
    out: dict[str, Any] = {"campaign": campaign, "gate": g2.gate,
                           "manifest_sha256": hashlib.sha256(manifest).hexdigest(),
                           "signers": signers, "verified": rep.ok, "unsigned_baseline": not rep.ok}
    if not rep.ok:
        out["unverified_reason"] = _unverified_reason(rep)
    return out


def check_custody(g2: GateDir, where: str, campaign: str, anchors: Optional[Sequence[Anchor]],
                  allow_unsigned: bool) -> dict[str, Any]:
    """Verify the baseline (files always; signers unless ``allow_unsigned``) and pin it."""
    rep = verify_gate_dir(g2, where, anchors)
    record = custody_record(g2, rep, campaign)
    if not rep.ok and not allow_unsigned:
        how = ("give the trust file with --allowed-signers FILE (or allowed_signers: in the inventory)"
               if anchors is None else "have each party sign it (kvgate sign ... --role vendor|customer) with a "
               "key the trust file binds to that role")
        raise InputError(
            f"the G2 baseline of {where} ({g2.path}) is not VERIFIED: {record['unverified_reason']}. A baseline "
            f"must be signed by every required role ({', '.join(ROLES)}) with keys trusted through allowed_signers "
            f"before G3 compares against it: {how}; for a rehearsal, --allow-unsigned-baseline uses it anyway "
            "and labels the result 'unsigned baseline' everywhere")
    return record


def check_baseline(g2: GateDir, where: str, current: dict[str, Any], allow: Sequence[str], *,
                   campaign: str = "", anchors: Optional[Sequence[Anchor]] = None,
                   allow_unsigned: bool = False) -> BaselineCheck:
    """Verify the baseline's files and signers, then compare its fingerprint with ``current``
    (see module doc)."""
    custody = check_custody(g2, where, campaign, anchors, allow_unsigned)
    result = g2.load_result()
    recorded_fp = result.fingerprint or {}
    recorded = recorded_fp.get("fields") if isinstance(recorded_fp, dict) else None
    if not isinstance(recorded, dict):
        recorded = {}
    known = set(recorded) | set(current)
    unknown = [f for f in allow if f not in known]
    if unknown:
        raise InputError(f"--allow-baseline-mismatch: unknown fingerprint field(s) {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(known))}")
    diff = fingerprint_diff(recorded, current)
    refused = [d for d in diff if d[0] not in allow]
    if refused:
        lines = "\n".join(f"  {k}: baseline {_show(a)}, this run {_show(b)}" for k, a, b in refused)
        hint = ("the baseline was recorded without a workload fingerprint (an older kvgate): rerun G2, or "
                if not recorded else "rerun G2 with this profile, or ")
        raise InputError(
            f"the G2 baseline of {where} is not comparable with this run: {len(refused)} workload "
            f"fingerprint field(s) differ:\n{lines}\n{hint}accept named differences with "
            f"--allow-baseline-mismatch {' '.join(k for k, _, _ in refused)}")
    accepted = [{"field": k, "baseline": a, "this_run": b} for k, a, b in diff]
    return BaselineCheck(where=where, digest=str(recorded_fp.get("digest", "")), accepted=accepted,
                         custody=custody)


def _show(value: Any) -> str:
    return value if value == MISSING else json.dumps(value, default=str)


def check_standing(gd: GateDir, where: str, gate: str, campaign_id: Optional[str]) -> None:
    """Before ``gate`` trusts ``gd`` (G1 and G2 for G3; G3 and G1 for G4; issue 51), the directory
    must be as its manifest says (every signature present valid) and of this campaign (its verdict,
    now verified, is then checked PASS by the prerequisite checks): the campaign id its result
    records must be ``campaign_id``, the id of the campaign it is read from. ``None``: that campaign
    has no campaign.json, so no gate ran there (every gate run writes one before its result) and the
    directory was put there from elsewhere. Otherwise exit 2, naming the file."""
    bad = _verification_problems(verify(gd.path, anchors=None, roles=ROLES), f"{gd.path}/")
    if bad:
        raise InputError(f"{gate} stands on {gd.gate} of {where}, which failed verification: {'; '.join(bad)}")
    check_campaign_id(gd, where, gate, campaign_id)


def check_campaign_id(gd: GateDir, where: str, gate: str, campaign_id: Optional[str]) -> None:
    """``gd``'s result must record ``campaign_id`` (see ``check_standing``)."""
    result = gd.load_result()  # its verdict: the prerequisite checks that follow, with their advice
    recorded = (result.custody or {}).get("campaign_id")
    if campaign_id is None:
        raise InputError(f"{gate} stands on {gd.gate} of {where}, but {gd.result_path} is of campaign id "
                         f"{recorded or '(none recorded)'} and {gd.path.parent / 'campaign.json'} does not exist: "
                         "no gate ran in this campaign, so the directory came from another one; run it here")
    if recorded != campaign_id:
        raise InputError(f"{gate} stands on {gd.gate} of {where}, but {gd.result_path} is of campaign id "
                         f"{recorded or '(none recorded)'}, not this campaign's {campaign_id}: a gate directory "
                         "of another campaign (or of a kvgate before campaign ids); run it here")
