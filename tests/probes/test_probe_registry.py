"""Probes are registered objects: every registered probe has its catalog metric, its chart layout
and docs; and a fake probe defined here alone is run by `kvgate probe` (one subcommand per registered
probe) through the same one-node runner the gate pipelines use."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml
from pydantic import BaseModel

from harness.catalog import METRICS
from harness.cli.main import run
from harness.config.inventory import Inventory
from harness.config.profile import Profile
from harness.errors import InputError
from harness.probes.registry import PROBES, ProbeKind, Where, get_probe, register_probe, unregister_probe
from harness.remote.base import Executor

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", list(PROBES))
def test_every_probe_has_metric_chart_layout_and_docs(name: str) -> None:
    kind = get_probe(name)
    paths = list(METRICS)
    assert any(p.endswith(f"{name}.{kind.metric}") for p in paths), f"{name}.{kind.metric} is not in the catalog"
    charts_doc = (REPO / "harness" / "report" / "charts.py").read_text().split('"""')[1]
    assert f'"{kind.chart_key}":' in charts_doc, f"no measurements.{kind.chart_key} layout in report/charts.py"
    arch = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    assert f"`{name}`" in arch, f"probe {name} is not named in docs/ARCHITECTURE.md"
    assert kind.help and kind.description
    if kind.run is not None:
        assert kind.select is not None and kind.rows is not None


def test_unknown_probe_lists_the_known_ones() -> None:
    with pytest.raises(InputError, match="known: fio, checkpoint, modelload"):
        get_probe("iperf")


# --- a fake probe, defined here only ---------------------------------------------------------------

class FakeSpec(BaseModel):
    size: int = 3


@dataclass
class FakeResult:
    node: str
    path: str
    bytes_written: int

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "path": self.path, "bytes": self.bytes_written, "evidence": self.path}


def _run(ex: Executor, where: Where, spec: Any, out: Path, python: str) -> FakeResult:
    path = f"{where}/fake-probe.bin"
    ex.run([python, "-c", f"open({path!r}, 'wb').write(b'x' * {spec.size})"])
    return FakeResult(ex.node, path, spec.size)


def _select(spec: Any, inv: Inventory, profile: Profile, node: Optional[str],
            target: Optional[str]) -> list[tuple[str, Where]]:
    return [(n.name, t.path) for n in inv.nodes for t in n.storage if target in (None, t.name)]


FAKE = ProbeKind(
    name="fakeprobe", help="fake probe: writes a few bytes", description="A test probe.",
    spec_of=lambda profile: FakeSpec(), run=_run, where_on=lambda spec, target: target.path,
    metric="bytes", leaf=lambda res, base: {"value": res.bytes_written, "text": str(res.bytes_written)},
    chart_key="fakeprobe", chart=lambda res: {"bytes": res.bytes_written},
    rows=lambda results: (("node", "bytes"), [[r.node, r.bytes_written] for r in results]),
    select=_select,
)


@pytest.fixture()
def fake_probe() -> Iterator[ProbeKind]:
    register_probe(FAKE)
    try:
        yield FAKE
    finally:
        unregister_probe(FAKE.name)


def test_a_fake_probe_runs_from_the_cli_by_registering_one_object(
    fake_probe: ProbeKind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tier = tmp_path / "tier"
    tier.mkdir()
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump({"cluster": "t", "nodes": [
        {"name": "local", "host": "localhost", "connection": "local",
         "storage": [{"name": "fast", "path": str(tier)}]}]}))
    assert run(["probe", "--help"]) == 0
    assert "fakeprobe" in capsys.readouterr().out
    out = tmp_path / "out"
    code = run(["probe", "fakeprobe", "--inventory", str(inv), "--profile", str(REPO / "profiles" / "demo.yaml"),
                "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert (tier / "fake-probe.bin").read_bytes() == b"xxx"
    assert "local" in text and "3" in text
    results = json.loads((out / "results.json").read_text())
    assert results["kind"] == "fakeprobe" and results["results"][0]["bytes"] == 3


def test_without_the_registration_the_cli_does_not_know_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["probe", "fakeprobe"]) == 2


def test_the_fake_probe_runs_as_a_gate_step_through_the_same_runner(fake_probe: ProbeKind, tmp_path: Path) -> None:
    from harness.config.loader import load_gate, load_inventory, load_profile
    from harness.pipelines.shared.context import GateRun
    from harness.pipelines.shared.probesteps import probe_step
    from harness.store.campaign import Campaign

    tier = tmp_path / "tier"
    tier.mkdir()
    inv_path = tmp_path / "inv.yaml"
    inv_path.write_text(yaml.safe_dump({"cluster": "t", "nodes": [
        {"name": "local", "host": "localhost", "connection": "local",
         "storage": [{"name": "fast", "path": str(tier)}]}]}))
    prof_path = REPO / "profiles" / "demo.yaml"
    inventory, profile = load_inventory(inv_path), load_profile(prof_path)
    camp = Campaign.open(tmp_path / "reports", "c", inventory_path=inv_path, profile_path=prof_path, create=True)
    try:
        run_ = GateRun("G2", load_gate(REPO / "gates" / "G2.yaml"), inventory, profile, camp, camp.gate_dir("G2"),
                       progress=False)
        node = inventory.nodes[0]
        out = probe_step(run_, "fakeprobe", node, node.storage[0], "fakeprobe/baseline")
        assert out is not None and out["bytes"]["value"] == 3 and out["chart"] == {"bytes": 3}
        assert (tier / "fake-probe.bin").read_bytes() == b"xxx"
        # resumable: the recorded step is returned, the probe does not run again
        (tier / "fake-probe.bin").unlink()
        assert probe_step(run_, "fakeprobe", node, node.storage[0], "fakeprobe/baseline") == out
        assert not (tier / "fake-probe.bin").exists()
        run_.close()
    finally:
        camp.close()
