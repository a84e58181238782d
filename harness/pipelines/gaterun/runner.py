"""Run one gate end to end: validate inputs, open the campaign, run the gate's pipeline, evaluate
its checks, write ``result.json``, render the reports and the manifest, return the exit code."""

from __future__ import annotations

import datetime as _dt
import getpass
import hashlib
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from harness import __version__
from harness.config.crosscheck import check_profile
from harness.config.gatespec import GateSpec
from harness.config.inventory import Inventory
from harness.config.loader import load_gate, load_inventory, load_profile
from harness.config.profile import Profile, ThresholdOverride
from harness.config.yamlsource import load_yaml
from harness.errors import ConfigErrors, InputError, KvgateError, StorageFull
from harness.exitcodes import ExitCode
from harness.gates.evaluate import check_overrides, evaluate_gate
from harness.gates.fingerprint import fingerprint_diff, fingerprint_record
from harness.gates.gatefile import gate_file_notes, gate_file_record
from harness.gates.hardware import inventory_fingerprint
from harness.gates.result import build_gate_result
from harness.paths import gates_dir, reports_dir
from harness.pipelines.gaterun.applicability import expected_leaves, fill_expected, mark_not_applicable, not_applicable
from harness.pipelines.gaterun.baselinecheck import BaselineCheck, check_baseline, check_campaign_id, check_standing
from harness.pipelines.gaterun.fingerprint import g1_facts, recorded_versions, run_fingerprint
from harness.pipelines.shared.context import GateRun, summary_of
from harness.pipelines.shared.provisioned import check_enforceable, enforced_rates, provisioned_labels
from harness.pipelines.shared.systemfacts import add_system_facts
from harness.report import render_campaign_report, render_gate_reports, write_manifest
from harness.report.trust import Anchor, read_allowed_signers
from harness.store import journal
from harness.store.campaign import Campaign, GateDir, check_campaign_name, result_bytes
from harness.store.schema import GateResult, Verdict

log = logging.getLogger(__name__)

GATES = ("G1", "G2", "G3", "G4")
DISK_FULL_WAIT_S = 30.0  # how long a gate waits for space to record a disk-full fault before exiting 4


@dataclass
class GateOutcome:
    gate: str
    exit_code: ExitCode
    verdict: Verdict
    gate_dir: Path
    reports: list[Path]
    result: GateResult
    journal_head: str = journal.GENESIS  # sha256 of the campaign journal's last record after this run


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _gate_file(gate: str, gates_path: Optional[Path]) -> Path:
    base = gates_path or gates_dir()
    if base is None:
        raise InputError("no gates/ directory found (run from the kvgate checkout or pass --gates DIR)")
    path = Path(base) / f"{gate}.yaml"
    if not path.exists():
        raise InputError(f"gate file {path} not found")
    return path


def run_gate(gate: str, *, inventory_path: Path, profile_path: Path, campaign: str,
             reports_root: Optional[Path] = None, gates_path: Optional[Path] = None,
             baseline_campaign: Optional[str] = None, resume: bool = False,
             accept_new_host_keys: bool = False, operator: Optional[str] = None,
             progress: bool = True, allow_baseline_mismatch: Sequence[str] = (), wait: bool = True,
             on_window: Optional[Callable[[dict[str, Any]], None]] = None,
             allowed_signers: Optional[Path] = None, allow_unsigned_baseline: bool = False) -> GateOutcome:
    """Run ``gate`` (G1-G4) for ``campaign``; see the module docstring. G4 with ``wait=False``
    starts the soak and raises ``harness.pipelines.g4.soak.SoakDetached`` (nothing is decided yet)."""
    if gate not in GATES:
        raise InputError(f"unknown gate {gate!r}; known: {', '.join(GATES)}")
    # 1. Every input is validated before any node is touched.
    inventory, profile, spec, gate_files, overrides = _validated_inputs(gate, inventory_path, profile_path,
                                                                        gates_path)
    trust = BaselineTrust(_anchors(gate, inventory_path, inventory, allowed_signers), allow_unsigned_baseline)
    root = Path(reports_root) if reports_root else reports_dir()
    # 2. Prerequisites, read-only: a gate refused here creates nothing (no campaign.json, no runs.jsonl).
    check_campaign_name(campaign)
    _check_standing(gate, spec, root / campaign, campaign, _recorded_campaign_id(root / campaign))
    _check_prerequisites(gate, spec, root / campaign, campaign, root, baseline_campaign)
    _check_g1_first(gate, profile, inventory, root / campaign, campaign)  # its facts are in the fingerprint
    _baseline_check(gate, profile, inventory, root / campaign, campaign, root, baseline_campaign,
                    allow_baseline_mismatch, trust)
    check_enforceable(inventory, accept_new_host_keys=accept_new_host_keys)  # a declared rate kvgate cannot cap
    # 3. The campaign directory; one writer at a time (prerequisites checked again under the lock).
    camp = Campaign.open(root, campaign, inventory_path=Path(inventory_path), profile_path=Path(profile_path),
                         operator=operator or getpass.getuser(), create=True)
    try:
        # again under the lock; a campaign this run created has a new id, which no gate there records
        _check_standing(gate, spec, camp.path, camp.name, camp.id)
        _check_prerequisites(gate, spec, camp.path, camp.name, root, baseline_campaign)
        _check_g1_first(gate, profile, inventory, camp.path, camp.name)
        baseline = _baseline_check(gate, profile, inventory, camp.path, camp.name, root, baseline_campaign,
                                   allow_baseline_mismatch, trust)  # again under the lock
        gate_dir = camp.gate_dir(gate)
        if not resume and gate_dir.steps_done():
            raise InputError(
                f"{gate} of campaign {campaign!r} already has recorded steps ({gate_dir.path}); pass --resume "
                "to continue it, or use a new campaign name")
        run = GateRun(gate, spec, inventory, profile, camp, gate_dir, accept_new_host_keys=accept_new_host_keys,
                      progress=progress)
        started = _now()
        run_id = uuid.uuid4().hex  # the journal records the run before it touches a node (issue 51)
        journal.append(camp.path, "start", gate=gate, run_id=run_id, campaign_id=camp.id, started_at=started,
                       resumed=bool(resume and gate_dir.steps_done()), kvgate_version=__version__)
        try:
            try:
                with enforced_rates(run, keep_on=_runs_on(gate)):
                    measured, measurements = _measure(gate, run, root, baseline_campaign, wait, on_window)
                if provisioned_labels(inventory):  # page one and the terminal say what the rate is and who sets it
                    measurements["provisioned"] = provisioned_labels(inventory)
            finally:
                run.close()
            return _finalize(run, spec, overrides, measured, measurements, started, baseline, gate_files, run_id)
        except StorageFull as exc:
            # A full reports disk is a fault (exit 4), recorded once space is back (bounded wait).
            run.fault("the reports directory is full", exc)
            if not run.flush_faults(wait_s=DISK_FULL_WAIT_S):
                log.error("the fault could not be recorded in %s (disk still full)", gate_dir.path)
            raise
    finally:
        camp.close()


def _validated_inputs(gate: str, inventory_path: Path, profile_path: Path, gates_path: Optional[Path]
                      ) -> tuple[Inventory, Profile, GateSpec, list[dict[str, Any]], list[ThresholdOverride]]:
    """The inventory, profile and gate file, checked against each other (every problem at once),
    the gate file's record, and the profile's overrides of this gate's checks."""
    inventory = load_inventory(inventory_path)
    profile = load_profile(profile_path)
    spec_path = _gate_file(gate, gates_path)
    spec: GateSpec = load_gate(spec_path)
    gate_files = [gate_file_record(spec_path, spec)]
    profile_doc = load_yaml(profile_path)
    problems = check_profile(profile, [inventory], [spec], profile_doc, str(profile_path))
    if gate == "G3":
        from harness.pipelines.g3.compare import check_g3_inputs

        problems += check_g3_inputs(profile, profile_doc, str(profile_path))
    if problems:
        raise ConfigErrors(problems)
    overrides = [o for o in profile.overrides if o.gate == gate]
    check_overrides(spec, overrides)
    return inventory, profile, spec, gate_files, overrides


def _runs_on(gate: str) -> tuple[type[BaseException], ...]:
    """What leaves work running on after the gate returns (a G4 soak started without --wait): its
    provisioned-rate cgroup stays for it."""
    if gate != "G4":
        return ()
    from harness.pipelines.g4.soak import SoakDetached

    return (SoakDetached,)


def _measure(gate: str, run: GateRun, root: Path, baseline_campaign: Optional[str], wait: bool,
             on_window: Optional[Callable[[dict[str, Any]], None]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The gate's pipeline: (measured tree, measurements)."""
    if gate == "G4":
        from harness.pipelines.g4.soak import run_g4

        return run_g4(run, wait=wait, on_window=on_window)
    return _pipeline(gate, run, root, baseline_campaign)


def _recorded_campaign_id(camp_path: Path) -> Optional[str]:
    """The campaign's id; None when it has no campaign.json (no gate ran there)."""
    if not (camp_path / "campaign.json").exists():
        return None
    return Campaign.read(camp_path.parent, camp_path.name).id


def _check_standing(gate: str, spec: GateSpec, camp_path: Path, camp_name: str,
                    campaign_id: Optional[str]) -> None:
    """G3 and G4 check what they stand on before trusting it (issue 51): G1 and, for G4, its
    prerequisites in this campaign are verified against their manifests and of this campaign
    (``check_standing``), before the prerequisite checks read their (now verified) verdicts; the
    hardware and inventory fingerprints G3 then reads from G1 come from evidence verified here.
    G3's G2 baseline has its own, stricter check."""
    if gate not in ("G3", "G4"):
        return
    needs = ["G1"] + [p for p in spec.prerequisites if gate == "G4" and p != "G1"]
    for name in needs:  # one that is absent is refused by the prerequisite checks, with their words
        gd = GateDir(camp_path / name, name, create=False)
        if gd.result_path.is_file():
            check_standing(gd, f"campaign {camp_name!r}", gate, campaign_id)


def _check_g1_first(gate: str, profile: Profile, inventory: Inventory, camp_path: Path, camp_name: str) -> None:
    """G3 only in a campaign whose own G1 passed, for this inventory (its inventory fingerprint,
    ``harness.gates.hardware``), with the candidate's storage target in it: the storage under test
    must have passed arrival acceptance where it is compared (a G3 with --baseline in a fresh
    campaign would otherwise skip it). campaign.json pins the inventory file of a campaign started
    by a gate; the fingerprint also holds when G1's directory came from elsewhere."""
    if gate != "G3":
        return
    where = f"campaign {camp_name!r}"
    try:
        g1 = GateDir(camp_path / "G1", "G1", create=False).load_result()
    except KvgateError as exc:
        raise InputError(f"G3 needs a passed G1 in the same campaign ({where}): the candidate's storage must pass "
                         f"arrival acceptance where it is compared; run `kvgate gate G1 --campaign {camp_name}` "
                         f"first ({exc})") from None
    if g1.verdict != Verdict.PASS:
        raise InputError(f"G3 needs a passed G1 in {where}; G1 there is {g1.verdict.value}, and a gate's result is "
                         "final in its campaign: run G1 in a new campaign (`kvgate gate G1 --campaign NEW`), then G3 "
                         f"there, with `--baseline {camp_name}` if this campaign's G2 passed")
    _check_g1_inventory(g1, inventory, where)
    target = profile.arm(profile.candidate).storage
    probed = [o for c in g1.checks if c.id == "fio_read" for o in c.observations
              if f".{target}." in o.path and o.verdict == Verdict.PASS]
    if target and not probed:
        raise InputError(f"G3 needs the candidate's storage target {target!r} to have passed G1 in {where}, but "
                         f"G1's fio_read has no passed observation of it (was it in the inventory and the profile's "
                         "probes when G1 ran?)")


def _check_g1_inventory(g1: GateResult, inventory: Inventory, where: str) -> None:
    """G1's recorded inventory fingerprint must be this run's: G1 accepted these nodes and targets."""
    recorded = (g1.fingerprint or {}).get("fields")
    if not isinstance(recorded, dict):
        raise InputError(f"G3 needs G1 in {where} to have passed for this inventory, but G1 recorded no inventory "
                         "fingerprint (an older kvgate): rerun `kvgate gate G1` in a new campaign")
    diff = fingerprint_diff(recorded, inventory_fingerprint(inventory))
    if diff:
        lines = "\n".join(f"  {k}: G1 {json.dumps(a, default=str)}, this run {json.dumps(b, default=str)}"
                          for k, a, b in diff)
        raise InputError(f"G3 needs G1 in {where} to have passed for this inventory, but G1 accepted another one "
                         f"({len(diff)} inventory field(s) differ):\n{lines}\nrun G1 with this inventory first "
                         "(in a new campaign)")


def _baseline_dir(camp_path: Path, camp_name: str, root: Path,
                  baseline_campaign: Optional[str]) -> tuple[GateDir, str]:
    """The G2 gate directory G3 compares against, and how to name it (read-only)."""
    if baseline_campaign:
        return Campaign.read(root, baseline_campaign).gate_dir("G2"), f"campaign {baseline_campaign!r}"
    return GateDir(camp_path / "G2", "G2", create=False), f"campaign {camp_name!r}"


@dataclass(frozen=True)
class BaselineTrust:
    """How G3 decides whether its baseline may be used: the trust anchors its signatures are
    checked against (None: none given) and whether an unverified one is accepted (labelled)."""

    anchors: Optional[list[Anchor]]
    allow_unsigned: bool


def _anchors(gate: str, inventory_path: Path, inventory: Inventory,
             flag: Optional[Path]) -> Optional[list[Anchor]]:
    """The allowed_signers file of ``--allowed-signers``, else the inventory's ``allowed_signers``
    (relative to the inventory file); None when neither names one."""
    if gate != "G3":
        return None
    path = flag
    if path is None and inventory.allowed_signers:
        path = Path(inventory_path).parent / inventory.allowed_signers
    return read_allowed_signers(path) if path is not None else None


def _baseline_check(gate: str, profile: Profile, inventory: Inventory, camp_path: Path, camp_name: str, root: Path,
                    baseline_campaign: Optional[str], allow: Sequence[str],
                    trust: BaselineTrust) -> Optional[BaselineCheck]:
    """G3: the G2 baseline's custody (verified, or accepted unsigned) and its workload fingerprint
    against this run's (read-only; an unlike baseline is an InputError before anything is created)."""
    if gate != "G3":
        return None
    g2, where = _baseline_dir(camp_path, camp_name, root, baseline_campaign)
    current = run_fingerprint(profile, arm=profile.baseline, inventory=inventory, campaign_path=camp_path)
    checked = check_baseline(g2, where, current, allow, campaign=baseline_campaign or camp_name,
                             anchors=trust.anchors, allow_unsigned=trust.allow_unsigned)
    # the baseline is of the campaign it is read from (issue 51): not a G2 copied in from another
    check_campaign_id(g2, where, gate, _recorded_campaign_id(g2.path.parent))
    return checked


def _pipeline(gate: str, run: GateRun, root: Path, baseline_campaign: Optional[str]
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    if gate == "G1":
        from harness.pipelines.g1.arrival import run_g1

        return run_g1(run)
    if gate == "G2":
        from harness.pipelines.g2.baseline import run_g2

        return run_g2(run)
    from harness.pipelines.g3.compare import run_g3

    g2, where = _baseline_dir(run.campaign.path, run.campaign.name, root, baseline_campaign)
    run.notes.append(f"baseline: G2 of {where}")
    return run_g3(run, g2)


def _check_prerequisites(gate: str, spec: GateSpec, camp_path: Path, camp_name: str, root: Path,
                         baseline_campaign: Optional[str]) -> None:
    """Refuse to start unless the gates this one needs have passed (read-only: nothing created)."""
    from harness.pipelines.g3.compare import check_prerequisite

    for pre in spec.prerequisites:
        if gate == "G3" and pre == "G2" and baseline_campaign:
            other = Campaign.read(root, baseline_campaign)
            check_prerequisite(GateDir(other.path / "G2", "G2", create=False),
                               f"campaign {baseline_campaign!r}", gate)
            continue
        check_prerequisite(GateDir(camp_path / pre, pre, create=False), f"campaign {camp_name!r}", gate)


def _finalize(run: GateRun, spec: GateSpec, overrides: list[Any], measured: dict[str, Any],
              measurements: dict[str, Any], started: str, baseline: Optional[BaselineCheck],
              gate_files: list[dict[str, Any]], run_id: str) -> GateOutcome:
    run.gate_dir.write_evidence_json("measured.json", measured)
    measured = fill_expected(measured, expected_leaves(run.gate, run.inventory, run.profile))
    checks = evaluate_gate(spec, measured, overrides=overrides, seed=0)
    checks = mark_not_applicable(checks, not_applicable(run.gate, run.inventory, run.profile))
    summary = summary_of(run)
    versions = measurements.pop("versions", None) or recorded_versions(run.inventory, run.campaign.path)
    for node in summary["inventory"]["nodes"]:
        if versions.get(node["name"]):
            node["versions"] = versions[node["name"]]
    add_system_facts(summary["inventory"]["nodes"], run.inventory.nodes, g1_facts(run.inventory, run.campaign.path))
    if run.profile.engine.kind == "sim" and run.gate != "G1":
        summary["profile"]["engine_version"] = f"kvgate KV emulator {__version__}"
    fingerprint = None
    if run.gate in ("G2", "G3"):
        arm = run.profile.baseline if run.gate == "G2" else run.profile.candidate
        fingerprint = fingerprint_record(run_fingerprint(run.profile, arm=arm, inventory=run.inventory,
                                                         campaign_path=run.campaign.path))
    elif run.gate == "G1":  # what G1 accepted: G3 runs only where its inventory is this one
        fingerprint = fingerprint_record(inventory_fingerprint(run.inventory))
    if baseline is not None:
        run.notes.extend(baseline.notes())
    run.notes.extend(gate_file_notes(gate_files))
    # listed like a non-stock gate file (issue 51): a threshold the profile changed is an allowance
    run.notes.extend(f"THRESHOLD OVERRIDE {o.gate} {o.check}: {o.threshold} instead of the gate file's, by the "
                     f"profile ({o.reason})" for o in overrides)
    result = build_gate_result(
        spec, checks, campaign=run.campaign.name, started_at=started, finished_at=_now(),
        campaign_meta={"git_commit": run.campaign.meta.get("git_commit"),
                       "operator": run.campaign.meta.get("operator")},
        inventory=summary["inventory"], profile=summary["profile"], measurements=measurements,
        faults=run.faults, notes=run.notes,
        # G1 runs no engine: its facts and fio figures are real whatever engine the profile names.
        emulated=run.profile.engine.kind == "sim" and run.gate != "G1",
        fingerprint=fingerprint, baseline=baseline.record() if baseline is not None else None,
        gate_files=gate_files)
    result.custody = _custody(run, run_id)
    head, paths = _write_journaled(run, result, run_id)
    return GateOutcome(run.gate, ExitCode(result.exit_code), result.verdict, run.path, paths, result, head)


def _custody(run: GateRun, run_id: str) -> dict[str, Any]:
    """Which run of which campaign this result is, the gate's earlier runs in the journal (a re-run
    is labelled on the gate's own page, not only on the campaign's), and the tiers declared RAM."""
    runs = journal.gate_runs(journal.read_journal(run.campaign.path).records).get(run.gate, [])
    earlier = [e for e in runs if e.run_id != run_id]
    resumed = any(e.resumed for e in runs if e.run_id == run_id)
    memory = [{"node": n.name, "target": t.name, "path": t.path, "kind": t.kind}
              for n in run.inventory.nodes for t in n.storage if t.kind in ("memory", "tmpfs")]
    return {"campaign_id": run.campaign.id, "run_id": run_id, "resumed": resumed, "memory_tiers": memory,
            "earlier_runs": [{"run_id": e.run_id, "verdict": e.verdict, "started_at": e.started_at,
                              "finished_at": e.finished_at, "resumed": e.resumed} for e in earlier]}


def _write_journaled(run: GateRun, result: GateResult, run_id: str) -> tuple[str, list[Path]]:
    """Journal the verdict and the digest of ``result.json`` before writing it, then the gate's
    manifest, then the campaign's (which covers the journal); return the journal's head and the
    reports written."""
    data = result_bytes(result)
    common = {"gate": run.gate, "run_id": run_id, "campaign_id": run.campaign.id}
    journal.append(run.campaign.path, "result", **common, verdict=result.verdict.value,
                   started_at=result.started_at, finished_at=result.finished_at,
                   result_sha256=hashlib.sha256(data).hexdigest())
    run.gate_dir.write_result(result)
    paths = render_gate_reports(run.path)
    manifest = write_manifest(run.path)
    head = journal.append(run.campaign.path, "sealed", **common,
                          manifest_sha256=hashlib.sha256(manifest.read_bytes()).hexdigest())
    paths += render_campaign_report(run.campaign.path)
    return head, paths
