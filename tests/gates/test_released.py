"""Stock means released (issue 51 item 2): the digests of the released gate files ship in the
package, and a gate file is "stock" only when it has its gate's released digest. The adversary
edited the checkout's own gates/G3.yaml (25% -> 5%) and the result said stock: true, differences: []
because "stock" was compared with the same checkout."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.config.loader import load_gate
from harness.gates import gatefile
from harness.gates.released import RELEASED_FILE, released_digest, released_document

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_digests_are_those_of_gates() -> None:
    shipped = REPO / "harness" / "gates" / RELEASED_FILE
    assert shipped.read_text() == released_document(REPO / "gates"), "run python tools/release_gates.py"
    assert set(json.loads(shipped.read_text())["gates"]) == {"G1", "G2", "G3", "G4"}


def test_the_package_build_writes_them(tmp_path: Path) -> None:
    """``setup.py``'s build_py writes the digests of gates/ into the built package."""
    out = tmp_path / "build"
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(out)],  # noqa: S603
                   cwd=REPO, check=True, capture_output=True, timeout=300)
    assert (out / "harness" / "gates" / RELEASED_FILE).read_text() == released_document(REPO / "gates")


def _edited_checkout(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout whose gates/G3.yaml was edited in place: ttft_p50_reduction 25% -> 5%."""
    gates = tmp / "gates"
    shutil.copytree(REPO / "gates", gates)
    doc = yaml.safe_load((gates / "G3.yaml").read_text())
    for c in doc["checks"]:
        if c["id"] == "ttft_p50_reduction":
            c["threshold"] = "5%"
    (gates / "G3.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setattr(gatefile, "shipped_gates_dir", lambda: gates)
    return gates


def test_a_gate_file_edited_in_place_is_not_stock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gates = _edited_checkout(tmp_path, monkeypatch)
    rec = gatefile.gate_file_record(gates / "G3.yaml", load_gate(gates / "G3.yaml"))
    assert rec["stock"] is False and rec["stock_sha256"] == released_digest("G3") != rec["sha256"]
    assert [d["kind"] for d in rec["differences"]] == ["released_not_at_hand"]
    assert gatefile.gate_file_notes([rec])  # printed and on page one like any non-stock file
    # the released file elsewhere is stock; a copy edited elsewhere is diffed against the released text
    assert gatefile.gate_file_record(REPO / "gates" / "G1.yaml", load_gate(REPO / "gates" / "G1.yaml"))["stock"]
    monkeypatch.setattr(gatefile, "shipped_gates_dir", lambda: REPO / "gates")
    rec = gatefile.gate_file_record(gates / "G3.yaml", load_gate(gates / "G3.yaml"))
    assert rec["stock"] is False
    assert [d["text"] for d in rec["differences"]] == ["ttft_p50_reduction: threshold 25% -> 5%"]
