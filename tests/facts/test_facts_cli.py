"""`kvgate facts`: table and JSON on localhost, loopback SSH, and an unreachable node (exit 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.cli.main import run
from harness.ports import free_port


def _local_inventory(tmp_path: Path) -> Path:
    tier = tmp_path / "tier"
    tier.mkdir()
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "cluster: t\n"
        "nodes:\n"
        "  - name: here\n"
        "    host: localhost\n"
        "    connection: local\n"
        f"    storage: [{{name: tier, path: {tier}}}]\n"
        "    software: {fio: '*'}\n"
    )
    return inv


def test_facts_table_on_localhost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["facts", "--inventory", str(_local_inventory(tmp_path))])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0].split()[:2] == ["node", "os"]
    assert "here" in out and "tier:rw" in out and "fio" in out


def test_facts_json_has_facts_and_the_g1_comparison(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["facts", "--inventory", str(_local_inventory(tmp_path)), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    node = doc["nodes"]["here"]
    assert node["facts"]["targets"]["tier"]["writable"] is True
    assert "raw" not in node["facts"]
    assert node["g1"]["storage"]["tier"]["mounted"]["value"] is True
    assert node["g1"]["software"]["match"]["value"] is True
    again = tmp_path / "again"
    again.mkdir()
    run(["facts", "--inventory", str(_local_inventory(again)), "--json", "--raw"])
    raw = json.loads(capsys.readouterr().out)["nodes"]["here"]["facts"]["raw"]
    assert any("os-release" in k for k in raw)


def test_unknown_node_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["facts", "--inventory", str(_local_inventory(tmp_path)), "--node", "nope"])
    err = capsys.readouterr().err
    assert code == 2 and "nope" in err and "Traceback" not in err


@pytest.mark.ssh
def test_facts_over_ssh_and_an_unreachable_node(shared_ssh_cluster, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load(shared_ssh_cluster.inventory_path.read_text())
    dead_port = free_port()  # a loopback port nobody listens on
    dead = dict(doc["nodes"][0], name="dead", port=dead_port)
    doc["nodes"].append(dead)
    # no short connect_timeout: a closed loopback port refuses at once, and a 2 s one applied to the
    # live node too (banner, auth and channel waits as well), which beside a CPU hog came back without facts
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(doc))
    code = run(["facts", "--inventory", str(inv), "--json"])
    captured = capsys.readouterr()
    result = json.loads(captured.out)["nodes"]
    assert code == 4
    alive = doc["nodes"][0]["name"]
    assert result[alive]["facts"]["os"]["kernel"]
    assert "unreachable" in result["dead"]
    assert "dead unreachable" in captured.err


def test_a_missing_storage_directory_is_a_facts_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inv = _local_inventory(tmp_path)
    (tmp_path / "tier").rmdir()
    code = run(["facts", "--inventory", str(inv)])
    err = capsys.readouterr().err
    assert code == 4
    assert f"storage target tier: {tmp_path / 'tier'} does not exist on the node" in err
    (tmp_path / "tier").mkdir()
    assert run(["facts", "--inventory", str(inv)]) == 0


def test_facts_that_never_settle_are_a_node_fault_not_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Over a batching executor, a collection that always asks for one more command stops after
    MAX_PASSES batches: exit 4 like an unreachable node, the node and the pending command named, no
    traceback (it was a bare RuntimeError, an internal error, before)."""
    import harness.facts.collect as collect
    from harness.remote.batch import run_batch
    from harness.remote.local import LocalExecutor

    real = collect._collect

    def greedy(c: object, node: object) -> None:
        real(c, node)  # type: ignore[arg-type]
        c.run(["echo", f"one-more-{len(c.answers.runs)}"])  # type: ignore[attr-defined]

    monkeypatch.setattr(collect, "_collect", greedy)
    # the inventory's local node takes batches, as a Ray node does (each batch run item by item here)
    monkeypatch.setattr(LocalExecutor, "batches_commands", True, raising=False)
    monkeypatch.setattr(LocalExecutor, "run_many", run_batch, raising=False)
    code = run(["facts", "--inventory", str(_local_inventory(tmp_path))])
    err = capsys.readouterr().err
    assert code == 4, err
    assert "here" in err and "still asked for new commands" in err and "still pending: echo one-more-" in err
    assert "Traceback" not in err and "internal error" not in err
