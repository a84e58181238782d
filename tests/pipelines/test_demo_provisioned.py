"""The demo on its provisioned target, end to end: `kvgate demo` up to G1 on the shipped inventory
runs fio in a cgroup of kvgate's own that caps the disk at the declared 150 MB/s, labels the rate in
the terminal and the result, decides G1's provisioned_read, and leaves no cgroup behind. Where the
rate cannot be enforced, the demo says so in one line and runs on the raw disk; `kvgate gate` refuses
(exit 2) and creates nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from harness.cli.main import run
from harness.cli.outcome import demo_summary
from harness.config.loader import load_inventory
from harness.pipelines.gaterun.demo import unenforceable
from harness.probes.blkthrottle import STATE_DIR

REPO = Path(__file__).resolve().parents[2]
LABEL = "fast-disk: reads and writes provisioned at 150 MB/s by blk-throttle"


@pytest.mark.timeout(300)
def test_the_demo_runs_g1_capped_at_the_declared_rate_and_removes_its_cgroup(tmp_path: Path) -> None:
    campaign = f"t{uuid.uuid4().hex[:8]}-prov"
    reports = tmp_path / "reports"
    try:
        proc = subprocess.run(  # noqa: S603 - fixed argv, test code
            [sys.executable, "-m", "harness.cli.main", "demo", "--campaign", campaign, "--reports", str(reports),
             "--until", "G1"], capture_output=True, text=True, timeout=280, env={**os.environ, "PYTHONPATH": str(REPO)})
    finally:  # the shipped inventory's folders: remove only what this run made
        shutil.rmtree(Path("/var/tmp/kvgate/demo") / campaign, ignore_errors=True)
        for target in ("local-disk", "fast-disk"):
            shutil.rmtree(Path("/var/tmp/kvgate/tiers") / target / campaign, ignore_errors=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert LABEL in proc.stdout and "G1: PASS" in proc.stdout
    g1 = reports / campaign / "G1"
    result = json.loads((g1 / "result.json").read_text())
    assert LABEL in [r["label"] for r in result["measurements"]["provisioned"]]
    checks = {c["id"]: c for c in result["checks"]}
    assert checks["provisioned_read"]["verdict"] == "PASS"
    for obs in checks["fio_read"]["observations"]:
        assert abs(obs["measured"] / 150e6 - 1) <= 0.05, obs  # the cap, not the disk's 0.4-2.8 GB/s
    (cg,) = json.loads((g1 / "evidence" / "provisioned.json").read_text())
    assert cg["limits"][0]["read_bps"] == 150e6 and cg["cgroup"].rsplit("/", 1)[1].startswith("kvgate-")
    assert not Path(cg["cgroup"]).exists() and not Path(cg["marker"]).exists()
    assert Path(cg["marker"]).parent == Path(STATE_DIR)


def _ram_inventory(tmp_path: Path) -> Path:
    inv = yaml.safe_load((REPO / "inventory" / "localhost.yaml").read_text())
    for target in inv["nodes"][0]["storage"]:
        target["path"] = f"/dev/shm/kvgate-test-{uuid.uuid4().hex[:8]}-{target['name']}"
        Path(target["path"]).mkdir()
    path = tmp_path / "inventory.yaml"
    path.write_text("# test inventory\n" + yaml.safe_dump(inv))
    return path


def _cleanup(inventory: Path) -> None:
    for node in yaml.safe_load(inventory.read_text())["nodes"]:
        for target in node["storage"]:
            shutil.rmtree(target["path"], ignore_errors=True)


def test_where_the_rate_cannot_be_enforced_the_demo_says_why_and_uses_the_raw_disk(tmp_path: Path) -> None:
    inventory = _ram_inventory(tmp_path)
    try:
        why = unenforceable(inventory)
        assert why is not None and "reads cannot be provisioned here" in why and "RAM-backed" in why
        assert "\n" not in why
        assert all(t.provisioned is None and t.enforce is None for n in load_inventory(inventory).nodes
                   for t in n.storage)
        assert unenforceable(inventory) is None  # what is left declares nothing to enforce
    finally:
        _cleanup(inventory)


def test_a_gate_on_a_target_it_cannot_cap_exits_2_and_creates_nothing(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    inventory = _ram_inventory(tmp_path)
    reports = tmp_path / "reports"
    try:
        code = run(["gate", "G1", "--inventory", str(inventory), "--profile", str(REPO / "profiles" / "demo.yaml"),
                    "--campaign", "poc", "--reports", str(reports)])
    finally:
        _cleanup(inventory)
    assert code == 2
    err = capsys.readouterr().err
    assert "enforce: blk-throttle on a RAM-backed target" in err and "target local-disk" in err
    assert not (reports / "poc").exists()


class _Outcome:
    def __init__(self, gate: str, verdict: str, code: int) -> None:
        from harness.exitcodes import ExitCode
        from harness.records.outcome import Verdict

        self.gate, self.verdict, self.exit_code = gate, Verdict(verdict), ExitCode(code)


def test_the_summary_gives_every_gate_and_why_one_did_not_run() -> None:
    gates = ("G1", "G2", "G3", "G4")
    stopped = [_Outcome("G1", "PASS", 0), _Outcome("G2", "PASS", 0), _Outcome("G3", "INCONCLUSIVE", 3)]
    assert demo_summary(stopped, gates) == [  # type: ignore[arg-type]
        "G1: PASS", "G2: PASS", "G3: INCONCLUSIVE",
        "G4: not run (G3 ended INCONCLUSIVE, exit 3, and each gate needs the one before it to pass)"]
    raw = [*stopped[:2], _Outcome("G3", "PASS", 0), _Outcome("G4", "INCONCLUSIVE", 3)]
    lines = demo_summary(raw, gates, raw_disk="reads cannot be provisioned here (no io controller)")  # type: ignore[arg-type]
    assert lines[:4] == ["G1: PASS", "G2: PASS", "G3: PASS", "G4: INCONCLUSIVE"]
    assert len(lines) == 5 and lines[4].startswith("G4 is INCONCLUSIVE on the raw disk, not an error")
    assert demo_summary(raw, gates)[4:] == []  # on the provisioned disk an INCONCLUSIVE is no disk's wander
