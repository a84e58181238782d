"""``kvgate verify CAMPAIGN``'s campaign-level checks (issue 27): the gates present are the ones
``campaign.manifest`` lists (none removed, added or replaced, verdicts as listed), every gate's
``result.json`` is a regular file of this campaign (its name is the directory's), the manifest's
signatures are valid (and, with trust anchors, by keys trusted for their roles), and each campaign
PDF names this manifest's sha256 (a signed PDF of another set of gates does not pass for this one).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from harness.report.campaignmanifest import (
    CAMPAIGN_MANIFEST,
    KEYWORD,
    GateEntry,
    campaign_signatures,
    expected_entries,
    parse,
    recorded_journal,
)
from harness.report.i18n import LANGS
from harness.report.journalverify import check_journal
from harness.report.manifest import ManifestError, read_regular
from harness.report.pdf import pdf_name
from harness.report.pdfread import PdfBombError, bounded, open_pdf
from harness.report.sign import SignatureCheck, _check_sig, _trust
from harness.report.trust import Anchor

__all__ = ["CampaignCheck", "verify_campaign"]


@dataclass
class CampaignCheck:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    signatures: list[SignatureCheck] = field(default_factory=list)
    roles_satisfied: dict[str, str] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)  # every run of every gate, from the journal
    labels: list[str] = field(default_factory=list)  # what the signers accepted knowingly
    journal_head: str = ""

    def lines(self) -> list[str]:
        out = [f"RUNS     {r}" for r in self.runs]
        out += [f"PROBLEM  {p}" for p in self.problems]
        for s in self.signatures:
            who = f"{s.role or '?'} {s.signer or s.signer_id or '?'} ({s.fingerprint or 'no key'})"
            state = "ok      " if s.valid and s.trusted is not False else "BAD     "
            reason = s.reason or s.trust_reason
            out.append(f"{state} {CAMPAIGN_MANIFEST} {s.file}: {who}" + (f": {reason}" if reason else ""))
        out += [f"LABEL    {label}" for label in self.labels]
        out += [f"NOTE     {n}" for n in self.notes]
        if self.journal_head:
            out.append(f"NOTE     journal head {self.journal_head}: compare it with the head each gate run printed")
        return out


def _set_problems(campaign_dir: Path, recorded: dict[str, GateEntry], present: list[GateEntry]) -> list[str]:
    now = {e.gate: e for e in present}
    out = [f"gate {g} removed: {CAMPAIGN_MANIFEST} lists it ({e.verdict}) but {campaign_dir / g} has no "
           "readable gate" for g, e in recorded.items() if g not in now]
    out += [f"gate {g} added: it is not in {CAMPAIGN_MANIFEST}" for g in now if g not in recorded]
    for g, e in now.items():
        if g in recorded and recorded[g].manifest_sha256 != e.manifest_sha256:
            out.append(f"gate {g} replaced: its MANIFEST.sha256 has sha256 {e.manifest_sha256 or '(none)'}, "
                       f"{CAMPAIGN_MANIFEST} lists {recorded[g].manifest_sha256 or '(none)'}")
        elif g in recorded and recorded[g].verdict != e.verdict:
            out.append(f"gate {g}: verdict {e.verdict}, {CAMPAIGN_MANIFEST} lists {recorded[g].verdict}")
    return out


def pdf_manifest_digest(pdf: Path) -> Optional[str]:
    """The campaign manifest sha256 a campaign PDF names in its keywords (None: it names none).
    Raises PdfBombError when its streams inflate past kvgate's limits (``pdfread``)."""
    try:
        with bounded(pdf):
            meta = open_pdf(pdf).document_meta_view
    except PdfBombError:
        raise
    except Exception:  # noqa: BLE001 - any unreadable PDF: it names nothing
        return None
    for word in meta.keywords or []:
        if str(word).startswith(KEYWORD):
            return str(word)[len(KEYWORD):]
    return None


def _pdf_problems(campaign_dir: Path, digest: str) -> list[str]:
    out = []
    for lang in LANGS:
        pdf = campaign_dir / pdf_name(lang)
        if not pdf.is_file() or pdf.is_symlink():
            continue
        try:
            named = pdf_manifest_digest(pdf)
        except PdfBombError as exc:
            out.append(str(exc))
            continue
        if named is None:
            out.append(f"{pdf} names no campaign manifest: it does not say which gates it covers")
        elif named != digest:
            out.append(f"{pdf} belongs to another campaign manifest (sha256 {named}), not to "
                       f"{CAMPAIGN_MANIFEST} as it is (sha256 {digest or 'none'})")
    return out


def _signature_findings(campaign_dir: Path, message: bytes, check: CampaignCheck,
                        anchors: Optional[Sequence[Anchor]], roles: Sequence[str],
                        gate_roles: Sequence[str]) -> None:
    """The campaign manifest's signatures. With trust anchors, a campaign whose gates are signed
    needs its set signed too, by every role that signed a gate (issue 50): otherwise deleting a
    failing gate together with the campaign's signatures, then re-reporting, leaves a campaign of
    signed gates that verifies."""
    check.signatures = [_check_sig(campaign_dir, rel, message) for rel in campaign_signatures(campaign_dir)]
    check.problems += [f"{CAMPAIGN_MANIFEST} {s.file}: {s.reason}" for s in check.signatures if not s.valid]
    if anchors is None:
        check.notes.append(f"no trust anchors given: who signed {CAMPAIGN_MANIFEST} is not checked"
                           if check.signatures else
                           f"{CAMPAIGN_MANIFEST} is not signed (kvgate sign {campaign_dir} --key ... --role ...): "
                           "the set of gates is bound only by a signed campaign PDF, if there is one")
        return
    wanted = list(dict.fromkeys([*roles, *gate_roles]))
    if not check.signatures:
        if gate_roles:
            check.problems.append(
                f"{CAMPAIGN_MANIFEST} is not signed, but its gates are (by {', '.join(sorted(set(gate_roles)))}): "
                "the set of gates is bound by nobody, so a gate could have been removed with the campaign's "
                f"signatures (sign it: kvgate sign {campaign_dir} --key ... --role ...)")
        else:
            check.notes.append(f"{CAMPAIGN_MANIFEST} is not signed, and neither is any gate")
        return
    check.roles_satisfied = _trust(check.signatures, anchors, wanted, _dt.datetime.now(_dt.timezone.utc))
    check.problems += [f"{CAMPAIGN_MANIFEST} {s.file}: {s.trust_reason}" for s in check.signatures
                       if s.valid and s.trusted is False]
    check.problems += [f"{CAMPAIGN_MANIFEST}: role {r} has no valid signature by a key trusted for it"
                       + (" (a gate of this campaign is signed by that role)" if r not in roles else "")
                       for r in wanted if r not in check.roles_satisfied]


def _journal_findings(campaign_dir: Path, recorded_sha256: str, check: CampaignCheck) -> None:
    journal = check_journal(campaign_dir, recorded_sha256)
    check.problems += journal.problems
    check.labels += journal.labels
    check.runs = journal.runs
    check.journal_head = journal.head if journal.present else ""


def verify_campaign(campaign_dir: Path, anchors: Optional[Sequence[Anchor]],
                    roles: Sequence[str], gate_roles: Sequence[str] = ()) -> CampaignCheck:
    """The campaign-level checks; ``gate_roles`` are the roles with a valid signature on any of
    its gates (with anchors, each must have signed the campaign manifest too)."""
    campaign_dir = Path(campaign_dir)
    check = CampaignCheck()
    scan = expected_entries(campaign_dir)
    check.problems += scan.problems
    name = campaign_dir.resolve().name
    check.problems += [f"{g}/result.json is of campaign {c!r} but the directory is named {name!r}"
                       for g, c in scan.campaigns.items() if c != name]
    path = campaign_dir / CAMPAIGN_MANIFEST
    try:
        message = read_regular(path)
    except (OSError, ManifestError):
        check.problems.append(f"{path}: missing or not a regular file: which gates this campaign has is "
                              "recorded nowhere (kvgate report writes it)")
        _journal_findings(campaign_dir, "", check)
        return check
    content = message.decode("utf-8", "replace")
    _journal_findings(campaign_dir, recorded_journal(content), check)
    recorded_name, recorded, problems = parse(content)
    check.problems += problems
    if recorded_name != name:
        check.problems.append(f"{CAMPAIGN_MANIFEST} names campaign {recorded_name!r} but the directory is "
                              f"named {name!r}")
    check.problems += _set_problems(campaign_dir, recorded, scan.entries)
    check.problems += _pdf_problems(campaign_dir, hashlib.sha256(message).hexdigest())
    _signature_findings(campaign_dir, message, check, anchors, roles, gate_roles)
    return check
