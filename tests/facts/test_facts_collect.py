"""collect_facts on this machine (LocalExecutor) and over loopback SSH, and vendor tools replaced by
scripts that print captured real outputs (no GPU/NPU exists here; see tests/data/facts/SOURCES.md)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from harness.config.inventory import Node
from harness.facts.collect import collect_facts
from harness.facts.compare import compare_facts
from harness.facts.model import NodeFacts
from harness.remote.connect import executor_for
from harness.remote.local import LocalExecutor
from tests.remote.test_batch import BatchingLocal

DATA = Path(__file__).resolve().parents[1] / "data" / "facts"


def _node(**kw: object) -> Node:
    base: dict[str, object] = {"name": "n1", "host": "localhost", "connection": "local"}
    base.update(kw)
    return Node.model_validate(base)


def _fake_tool(bindir: Path, name: str, sample: str | None, exit_code: int = 0) -> None:
    """A stand-in for a vendor tool that prints a captured output (or fails)."""
    if sample:
        body = f"#!/bin/sh\ncat {DATA / sample}\n"
    else:
        body = f"#!/bin/sh\necho 'simulated failure' >&2\nexit {exit_code}\n"
    path = bindir / name
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def test_localhost_facts_are_real_and_missing_tools_are_facts(tmp_path: Path) -> None:
    target = tmp_path / "tier"
    target.mkdir()
    node = _node(storage=[{"name": "tier", "path": str(target), "capacity": "1 PB"},
                          {"name": "absent", "path": str(tmp_path / "nope"), "drives": 2}],
                 network=[{"interface": "lo", "speed": "100 Gb/s"}],
                 software={"fio": "*", "python": "3", "vllm": "0.20.1"})
    facts = collect_facts(LocalExecutor("n1"), node)
    assert facts.os is not None and facts.os.kernel == os.uname().release
    assert facts.versions["fio"] and facts.versions["python"].startswith("3.")
    assert facts.versions["vllm"] is None  # not installed here: a fact, not an error
    assert facts.targets["tier"].exists and facts.targets["tier"].writable
    assert facts.targets["tier"].usage is not None and facts.targets["tier"].usage.size_bytes > 0
    assert not facts.targets["absent"].exists
    for tool in ("nvme", "ethtool"):
        if not os.path.exists(f"/usr/sbin/{tool}") and not os.path.exists(f"/usr/bin/{tool}"):
            assert tool in facts.missing
    assert any(k.startswith("cat /proc/mounts") for k in facts.raw)  # evidence kept
    json.loads(facts.model_dump_json())  # serialisable

    m = compare_facts(node, facts, evidence=["evidence/facts/n1.json"])
    assert m["storage"]["tier"]["mounted"]["value"] is True
    assert m["storage"]["absent"]["mounted"]["value"] is False
    assert m["storage"]["tier"]["capacity"]["match"]["value"] is False  # 1 PB is not this disk
    assert "expected 1.00 PB" in m["storage"]["tier"]["capacity"]["match"]["detail"]
    if "nvme" in facts.missing:
        assert m["storage"]["absent"]["drives"]["match"]["value"] is None
        assert "nvme" in m["storage"]["absent"]["drives"]["match"]["detail"]
    sw = m["software"]["match"]
    assert sw["value"] is False and "vllm: expected 0.20.1, found not installed" in sw["detail"]
    assert m["storage"]["tier"]["mounted"]["evidence"] == ["evidence/facts/n1.json"]
    assert "accelerators" not in m  # nothing expected -> no leaf


def test_vendor_tools_replaced_by_captured_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _fake_tool(bindir, "amd-smi", "amdsmi_static_gpu_data_mi308x_amdsmi26.json")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    node = _node(platform="mi308x", accelerators={"model": "MI308X", "count": 8, "memory": "192 GB"})
    facts = collect_facts(LocalExecutor("n1"), node)
    assert facts.accelerator_source == "amd-smi" and facts.accelerators is not None
    assert len(facts.accelerators) == 8
    leaf = compare_facts(node, facts)["accelerators"]["match"]
    assert leaf["value"] is True, leaf["detail"]
    assert "AMD Instinct MI308X OAM x8" in leaf["text"]

    # amd-smi failing and no rocm-smi: the expectation exists, the fact does not -> NOT RUN
    _fake_tool(bindir, "amd-smi", None, exit_code=1)
    facts = collect_facts(LocalExecutor("n1"), node)
    assert facts.accelerators is None and "rocm-smi" in facts.missing
    assert any("amd-smi" in k and "simulated failure" in v for k, v in facts.errors.items())
    leaf = compare_facts(node, facts)["accelerators"]["match"]
    assert leaf["value"] is None and "simulated failure" in leaf["detail"]


def _fake_npu_smi(tmp_path: Path) -> Path:
    """A bin directory with one npu-smi script answering both `npu-smi info` and
    `npu-smi info -t board -i 0` from captured outputs."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "npu-smi"
    script.write_text(f'#!/bin/sh\nif [ "$2" = "-t" ]; then cat {DATA / "npusmi_board_910b3.txt"}; '
                      f'else cat {DATA / "npusmi_info_910b3_23.0.rc2.txt"}; fi\n')
    script.chmod(0o755)
    return bindir


def test_npu_smi_table_and_board_through_the_collector(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = _fake_npu_smi(tmp_path)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    node = _node(platform="ascend910b", accelerators={"model": "Ascend910B3", "count": 8, "memory": "64 GB"})
    facts = collect_facts(LocalExecutor("n1"), node)
    assert facts.versions["npu-driver"] == "23.0.rc2"
    leaf = compare_facts(node, facts)["accelerators"]["match"]
    assert leaf["value"] is False and "count 2 cards / 2 devices, not 8" in leaf["detail"]


@pytest.mark.ssh
def test_facts_over_loopback_ssh(shared_ssh_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    inv = shared_ssh_cluster.inventory
    name = inv.nodes[0].name
    executor = executor_for(inv, name)
    try:
        node = inv.nodes[0].model_copy(update={"storage": []})
        node = Node.model_validate({**node.model_dump(exclude_none=True),
                                    "storage": [{"name": "t", "path": str(tmp_path)}],
                                    "software": {"fio": "*"}})
        facts = collect_facts(executor, node)
    finally:
        executor.close()
    assert facts.node == name
    assert facts.os is not None and facts.os.id
    assert facts.targets["t"].writable
    m = compare_facts(node, facts)
    assert m["storage"]["t"]["mounted"]["value"] is True
    assert m["software"]["match"]["value"] is True


def _comparable(facts: NodeFacts) -> dict[str, Any]:
    """A node's facts without what changes between two looks at a live machine: the time taken, a
    target's free space (other processes write to this disk) and the free memory in /proc/meminfo's
    output (its total, the fact, stays)."""
    d = facts.model_dump(mode="json")
    d.pop("collected_at")
    for t in d["targets"].values():
        t["usage"] = t["usage"] and {k: v for k, v in t["usage"].items() if k not in ("used_bytes", "avail_bytes")}
    d["raw"] = {k: (None if k.startswith("df ") or k == "cat /proc/meminfo" else v) for k, v in d["raw"].items()}
    return d


def test_batched_facts_are_the_facts_of_one_command_at_a_time(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Over an executor that takes batches (the Ray executor), facts come from a few batches, every
    command inside one, and are exactly what one command at a time finds, fallbacks and commands
    that depend on an earlier output included (npu-smi's board after its table, mdadm after the
    target's probe, the sysfs link speed when ethtool is missing or fails)."""
    bindir = _fake_npu_smi(tmp_path)
    _fake_tool(bindir, "mdadm", "mdadm_export_raid0.txt")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    target = tmp_path / "tier"
    target.mkdir()
    node = _node(platform="ascend910b", accelerators={"model": "Ascend910B3", "count": 8, "memory": "64 GB"},
                 storage=[{"name": "tier", "path": str(target), "device": "/dev/md0"},
                          {"name": "absent", "path": str(tmp_path / "nope")}],
                 network=[{"interface": "lo", "speed": "100 Gb/s"}],
                 software={"fio": "*", "python": "3", "vllm": "0.20.1"})
    one_at_a_time = collect_facts(LocalExecutor("n1"), node)
    ex = BatchingLocal()
    batched = collect_facts(ex, node)
    assert ex.singles == 0 and 2 <= ex.batches <= 3, (ex.singles, ex.batches)
    assert _comparable(batched) == _comparable(one_at_a_time)
    # the chains were followed to their end, not cut at the first batch
    assert batched.versions["npu-driver"] == "23.0.rc2" and "/dev/md0" in batched.raid
    assert batched.targets["tier"].usage is not None and not batched.targets["absent"].exists


def _one_more_each_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """A collector that, after everything it really collects, asks for one command more than the node
    has answered so far: a batched collection of it never settles."""
    import harness.facts.collect as collect

    real = collect._collect

    def greedy(c: Any, node: Node) -> None:
        real(c, node)
        c.run(["echo", f"one-more-{len(c.answers.runs)}"])

    monkeypatch.setattr(collect, "_collect", greedy)


def test_a_collection_that_never_settles_names_the_node_and_what_is_pending(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.errors import InfraError
    from harness.facts.collect import MAX_PASSES, FactsUnsettled
    from harness.facts.parsers import FactsError

    _one_more_each_pass(monkeypatch)
    ex = BatchingLocal()
    with pytest.raises(FactsUnsettled) as caught:
        collect_facts(ex, _node(name="n7"))
    err = caught.value
    assert isinstance(err, FactsError) and isinstance(err, InfraError)
    assert ex.batches == MAX_PASSES and ex.singles == 0
    assert err.node == "n7" and len(err.pending) == 1 and err.pending[0].startswith("echo one-more-")
    assert str(err).startswith(f"n7: the facts collection still asked for new commands after {MAX_PASSES} batches")
    assert err.pending[0] in str(err)
