"""``kvgate verify GATE_OR_CAMPAIGN_DIR --allowed-signers FILE``: check a gate directory (or every
gate of a campaign) against its manifest, its signed statement and its signatures, and that every
required role signed with a trusted key."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.cli.table import json_safe, terminal_safe
from harness.errors import InputError
from harness.exitcodes import ExitCode
from harness.report.campaignmanifest import CAMPAIGN_MANIFEST
from harness.report.campaignverify import CampaignCheck, verify_campaign
from harness.report.documents import campaign_document_problems, pdf_problems
from harness.report.loader import RESULT_FILE
from harness.report.render import gate_dirs
from harness.report.sign import ROLES, VerifyReport, verify
from harness.report.signer import check_role
from harness.report.trust import Anchor, read_allowed_signers, read_authorized_keys

EXIT_HELP = (
    "Exit codes: 0 VERIFIED (every file as signed, nothing extra, statement matches result.json, "
    "every required role signed by a key the anchors bind to <signer-id>@<role>); "
    "1 NOT VERIFIED (a file changed, missing or extra, a symlink or special file, a bad signature, "
    "an untrusted signer or a required role missing: each finding is named); "
    "a campaign directory also fails when its report.html is not the rendering of its gates as they "
    "are now, or a report.pdf signature is broken; "
    "with --strict, 1 also when any label is present (an allowance the gates were decided under: unsigned "
    "baseline, non-stock gate file, threshold override, baseline mismatch, memory tier, re-run); "
    "3 integrity OK but signers not authenticated (no --allowed-signers/--trusted-keys given); "
    "2 usage error (unreadable trust file, not a gate or campaign directory).")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "verify",
        help="verify a gate's (or a campaign's) manifest, statement, signatures and signers",
        description="Recompute the sha256 of every file of GATE_DIR and compare with MANIFEST.sha256 "
        "(naming changed, missing and extra files, symlinks and special files), check SIGNOFF.json "
        "against result.json and the directory name, check every SSH signature in signatures/ "
        "(namespace kvgate-report@v1) and that each required role is signed by a key the trust "
        "anchors bind to <signer-id>@<role>. A campaign directory verifies every gate in it. "
        + EXIT_HELP,
    )
    p.add_argument("target", metavar="DIR", type=Path, help="reports/<campaign>/G3, or reports/<campaign>")
    p.add_argument("--allowed-signers", type=Path, metavar="FILE",
                   help="OpenSSH allowed_signers file (as for ssh-keygen -Y verify): principals "
                   "<signer-id>@<role> bind each key to a signer and the roles it may sign")
    p.add_argument("--trusted-keys", type=Path, metavar="FILE",
                   help="authorized_keys file; its principals=\"<signer-id>@<role>,...\" option binds "
                   "each key (a key without it satisfies no role)")
    p.add_argument("--roles", default=",".join(ROLES), metavar="R1,R2",
                   help="roles that must each have a trusted signature (default: %(default)s)")
    p.add_argument("--pdf-trust", type=Path, action="append", metavar="CERT",
                   help="PEM/DER certificate trusted for PDF signatures (repeatable); with it every "
                   "report.pdf must carry a valid signature of each required role by a trusted "
                   "certificate. Without it, PDF signatures present must still be intact.")
    p.add_argument("--strict", action="store_true",
                   help="refuse labels: exit 1 when any gate was decided under an allowance (each LABEL line "
                   "says which and what it means), so a customer accepts only a result with none")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.set_defaults(func=run)


def _anchors(args: argparse.Namespace) -> list[Anchor] | None:
    if args.allowed_signers is None and args.trusted_keys is None:
        return None
    out: list[Anchor] = []
    if args.allowed_signers is not None:
        out += read_allowed_signers(args.allowed_signers)
    if args.trusted_keys is not None:
        out += read_authorized_keys(args.trusted_keys)
    return out


@contextlib.contextmanager
def _quiet_libraries() -> Iterator[None]:
    """No library warning or log record reaches the user (issue 53): pyHanko warns about DSA on
    import and logs a traceback for every certificate it cannot chain; verify names each finding
    itself."""
    loggers = [logging.getLogger(n) for n in ("pyhanko", "pyhanko_certvalidator")]
    before = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for lg in loggers:  # the level is inherited by every module logger below these
            lg.setLevel(logging.CRITICAL + 1)
        try:
            yield
        finally:
            for lg, level in zip(loggers, before):
                lg.setLevel(level)


def run(args: argparse.Namespace) -> int:
    with _quiet_libraries():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    anchors = _anchors(args)
    roles = [check_role(r.strip()) for r in args.roles.split(",") if r.strip()]
    if not roles:
        raise InputError("--roles: name at least one role")
    target: Path = args.target
    if not target.is_dir():
        raise InputError(f"{target}: not a directory")
    campaign_problems: list[str] = []
    custody: CampaignCheck | None = None
    if (target / RESULT_FILE).is_file():
        reports = [verify(target, anchors=anchors, roles=roles, progress=not args.json)]
    else:
        gates = gate_dirs(target)
        if not gates:
            raise InputError(f"{target}: neither a gate directory (no {RESULT_FILE}) nor a campaign "
                             "directory (no gate directory with one)")
        reports = [verify(g, anchors=anchors, roles=roles, progress=not args.json) for g in gates]
        campaigns = {r.campaign for r in reports}
        if len(campaigns) > 1:
            for r in reports:
                r.problems.append(f"gates of different campaigns in one directory: {sorted(map(str, campaigns))}")
        campaign_problems = campaign_document_problems(target) + pdf_problems(target, roles, args.pdf_trust)
        gate_roles = sorted({s.role for r in reports for s in r.signatures if s.valid and s.role})
        custody = verify_campaign(target, anchors, roles, gate_roles)
        campaign_problems += custody.problems
    for r in reports:
        r.problems += pdf_problems(Path(r.gate_dir), roles, args.pdf_trust)
    labels = [label for r in reports for label in r.labels] + (custody.labels if custody else [])
    if args.json:
        doc: Any = [r.to_dict() for r in reports] if len(reports) > 1 else reports[0].to_dict()
        extra = {"campaign_problems": campaign_problems, "campaign_notes": custody.notes,
                 "campaign_labels": custody.labels, "runs": custody.runs} if custody is not None else {}
        doc = {"gates": doc, **extra} if len(reports) > 1 else {**doc, **extra}
        doc["strict"], doc["labels"] = bool(args.strict), labels
        print(json_safe(json.dumps(doc, indent=2, ensure_ascii=False)))
    else:
        for r in reports:
            for line in r.lines():  # each line once: a received string cannot add a line of its own
                print(terminal_safe(line))
        if custody is not None:
            _print_campaign(target, reports, campaign_problems, custody)
        if args.strict and labels:
            print(f"NOT VERIFIED (--strict): {len(labels)} label(s): every LABEL line above is an allowance "
                  "the result was decided under")
    if campaign_problems:
        return int(ExitCode.GATE_FAILED)
    code = _exit(reports)
    if code == ExitCode.OK and args.strict and labels:
        return int(ExitCode.GATE_FAILED)
    return int(code)


def _print_campaign(target: Path, reports: list[VerifyReport], campaign_problems: list[str],
                    custody: CampaignCheck) -> None:
    for p in campaign_problems:
        if p not in custody.problems:
            print(f"PROBLEM  {terminal_safe(p)}")
    for line in custody.lines():
        print(terminal_safe(line))
    bad = [f"{Path(r.gate_dir).name} ({r.status})" for r in reports if not r.ok]
    bad += ["the campaign page"] if [p for p in campaign_problems if p not in custody.problems] else []
    bad += [f"the set of gates ({CAMPAIGN_MANIFEST})"] if custody.problems else []
    verdicts = ", ".join(f"{r.gate or Path(r.gate_dir).name} {r.verdict or '?'}" for r in reports)
    n_labels = sum(len(r.labels) for r in reports) + len(custody.labels)
    print(f"campaign {terminal_safe(target)}: "
          + (f"VERIFIED (every gate and the campaign page): {terminal_safe(verdicts)}" if not bad else
             "NOT VERIFIED: " + terminal_safe(", ".join(bad)))
          + (f"; {n_labels} label(s)" if n_labels and not bad else "")
          + ("" if bad or custody.signatures else f"; {CAMPAIGN_MANIFEST} is not signed"))


def _exit(reports: list[VerifyReport]) -> ExitCode:
    if all(r.ok for r in reports):
        return ExitCode.OK
    if all(r.integrity_ok for r in reports) and not any(r.anchors_given for r in reports):
        return ExitCode.INCONCLUSIVE
    return ExitCode.GATE_FAILED
