"""Issue 27 items 2 and 4, end to end through the CLI: a G3 compares only against a baseline
measured on the same hardware (the campaign's G1 facts: accelerators, CPU, memory, kernel, the
storage target's device, kind and filesystem; the kvgate version), and runs only where G1 passed for
its own inventory. Each scenario passed silently before; each is refused before anything is
measured, naming the field and both values. The baseline is the session's one real G1+G2 campaign
(tests/support/campaign.py); a scenario's different hardware is its own G1's facts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.report.sign import write_manifest
from tests.integrity.test_false_pass import FROM_BASE, Base, gate_argv, kvgate, write
from tests.support.campaign import PassedBaseline

pytestmark = [pytest.mark.fio, pytest.mark.slow]


@pytest.fixture
def base(tmp_path: Path, passed_baseline: PassedBaseline) -> Base:
    return Base(tmp_path / "hardware", passed_baseline)


def _edit_g1_facts(base: Base, campaign: str, **changes: Any) -> None:
    """The scenario's G1 ran on other hardware: its recorded facts say so."""
    path = base.reports / campaign / "G1" / "evidence" / "facts" / "local.json"
    facts = json.loads(path.read_text())
    facts.update(changes)
    path.write_text(json.dumps(facts))
    write_manifest(path.parents[2])  # as a G1 run on that hardware left it (G3 verifies G1 first)


def _inventory(base: Base, name: str, **target: Any) -> Path:
    """The scenario's inventory: the node reached at another host name, its tier as given."""
    data = {"cluster": "integrity", "defaults": {"workdir": str(base.root / "work")},
            "nodes": [{"name": "local", "host": "127.0.0.1", "connection": "local", "roles": ["server", "client"],
                       "storage": [{"name": "tier", "path": str(base.root / "tier"), **target}]}]}
    return write(base.root / f"{name}.yaml", data)


def test_baseline_from_other_hardware_is_refused_naming_each_field(
        base: Base, passed_baseline: PassedBaseline, capsys: pytest.CaptureFixture[str]) -> None:
    recorded = passed_baseline.result("G2")["fingerprint"]["fields"]
    assert recorded["hardware.nodes.cpu_model"] != ["(not collected)"]  # the baseline's own G1 facts
    camp = base.campaign("otherhw")
    _edit_g1_facts(base, camp, cpu_model="Intel(R) Xeon(R) Platinum 8480+", memory_bytes=2048 * 2**30)
    inv = _inventory(base, "renamed-host")  # a node's host name alone is not a mismatch
    code, out = kvgate(capsys, *gate_argv("G3", inv, base.prof, base.reports, camp, *FROM_BASE))
    assert code == 2, out
    assert "2 workload fingerprint field(s) differ" in out, out  # the host name is not one of them
    assert (f"hardware.nodes.cpu_model: baseline {json.dumps(recorded['hardware.nodes.cpu_model'])}, "
            'this run ["Intel(R) Xeon(R) Platinum 8480+"]') in out
    assert (f"hardware.nodes.memory: baseline {json.dumps(recorded['hardware.nodes.memory'])}, "
            'this run ["2048 GiB"]') in out
    assert "--allow-baseline-mismatch hardware.nodes.cpu_model hardware.nodes.memory" in out
    assert not (base.reports / camp / "G3").exists()  # nothing was measured


def test_hardware_nobody_collected_is_not_taken_as_equal(
        base: Base, capsys: pytest.CaptureFixture[str]) -> None:
    camp = base.campaign("nofacts")
    _edit_g1_facts(base, camp, cpu_model=None)  # lscpu missing on the node: the CPU is unknown
    code, out = kvgate(capsys, *gate_argv("G3", base.inv, base.prof, base.reports, camp, *FROM_BASE))
    assert code == 2, out
    assert 'hardware.nodes.cpu_model: baseline ["' in out and 'this run ["(not collected)"]' in out
    assert not (base.reports / camp / "G3").exists()


def test_g1_of_another_inventory_does_not_admit_g3(base: Base, capsys: pytest.CaptureFixture[str]) -> None:
    # G1 accepted the tier as declared by the shared inventory; this run declares it a RAID of NVMe
    camp = base.campaign("otherinv")
    inv = _inventory(base, "raid", kind="nvmeof-raid", drives=4, raid="raid0")
    code, out = kvgate(capsys, *gate_argv("G3", inv, base.prof, base.reports, camp, *FROM_BASE))
    assert code == 2, out
    assert "G3 needs G1 in campaign 'otherinv' to have passed for this inventory" in out
    assert "node.local.storage.tier: G1 {" in out and '"kind": "nvmeof-raid"' in out and '"kind": "other"' in out
    assert not (base.reports / camp / "G3").exists()
    # a G1 recorded without an inventory fingerprint (an older kvgate) does not admit it either
    g1 = base.reports / camp / "G1" / "result.json"
    res = json.loads(g1.read_text())
    res["fingerprint"] = None
    g1.write_text(json.dumps(res))
    write_manifest(g1.parent)  # as that kvgate's G1 run left it
    code, out = kvgate(capsys, *gate_argv("G3", base.inv, base.prof, base.reports, camp, *FROM_BASE))
    assert code == 2 and "G1 recorded no inventory fingerprint" in out, out
