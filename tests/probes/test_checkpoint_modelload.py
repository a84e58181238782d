"""Checkpoint write (R1) and model load (R9) probes, really run through the executor's Python on
real files (a few MiB), locally and on a loopback SSH node."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.config.inventory import StorageTarget
from harness.config.loader import load_gate
from harness.config.profile import CheckpointSpec, ModelLoadSpec
from harness.errors import InputError
from harness.gates.evaluate import evaluate_check
from harness.gates.outcome import Verdict
from harness.probes import modelload as modelload_module
from harness.probes.checkpoint import ColdRead, cold_read, run_checkpoint_probe
from harness.probes.errors import ProbeRefused
from harness.probes.measured import checkpoint_leaf, modelload_leaf
from harness.probes.modelload import run_modelload_probe
from harness.probes.node_io import SCRIPT, find_python, run_helper
from harness.probes.steady import check_steady_state
from harness.readbuffer import ReadBuffer
from harness.remote.base import Executor
from harness.remote.connect import executor_for
from harness.remote.local import LocalExecutor
from tests.support.sshd import SshCluster

MiB = 2**20
ROOT_DIR = Path(__file__).resolve().parents[2]
ROOT = os.geteuid() == 0


def _tier(tmp_path: Path) -> StorageTarget:
    d = tmp_path / "tier"
    d.mkdir()
    return StorageTarget(name="tier", path=str(d))


def test_checkpoint_writes_times_and_removes(tmp_path: Path) -> None:
    target = _tier(tmp_path)
    spec = CheckpointSpec(size="24 MiB", files=5, writers=3, read_back=True)
    res = run_checkpoint_probe(LocalExecutor("n1"), target, spec, tmp_path / "out")
    assert res.total_bytes == 24 * MiB and res.files == 5 and res.writers == 3
    assert sum(f.bytes for f in res.per_file) == 24 * MiB and len(res.per_file) == 5
    assert all(f.fsync_s is not None and f.fsync_s >= 0 for f in res.per_file)
    assert all(0 <= f.start_s < f.end_s <= res.total_s for f in res.per_file)
    assert res.write_bw_bytes == pytest.approx(res.total_bytes / res.total_s)
    assert res.read_back is not None and res.read_back.total_bytes == 24 * MiB
    assert res.read_back.cache_dropped == ROOT and not res.read_back.may_include_cached
    assert list(Path(target.path).iterdir()) == []
    evidence = json.loads(res.evidence.read_text())
    assert evidence["write"]["total_s"] == res.total_s and evidence["write"]["files"] == 5
    leaf = checkpoint_leaf(res, tmp_path / "out")
    assert leaf["value"] == res.write_bw_bytes and leaf["evidence"] == [res.evidence.name]


def test_checkpoint_is_written_in_rounds_after_a_drain_and_decided_on_their_interval(tmp_path: Path) -> None:
    spec = CheckpointSpec(size="4 MiB", files=2, writers=2, max_rounds=5)
    res = run_checkpoint_probe(LocalExecutor("n1"), _tier(tmp_path), spec, tmp_path / "out")
    assert len(res.rounds) == 5 and res.write_bw_bytes == pytest.approx(statistics.median(res.rounds))
    assert res.drain is not None and res.drain.drained and res.steady is not None
    evidence = json.loads(res.evidence.read_text())
    assert [r["bw_bytes"] for r in evidence["rounds"]] == pytest.approx(list(res.rounds))
    assert evidence["drain"]["drained"] is True
    leaf = checkpoint_leaf(res)
    assert leaf["samples"] == {"kind": "percentile", "x": list(res.rounds), "q": 50}
    assert ("inconclusive" in leaf) is (not res.steady.steady)
    check = load_gate(ROOT_DIR / "gates" / "G2.yaml").check("checkpoint_write")
    steady = dataclasses.replace(res, rounds=(1.0e9, 1.01e9, 0.99e9, 1.0e9, 1.02e9),
                                 steady=check_steady_state([1.0e9, 1.01e9, 0.99e9, 1.0e9, 1.02e9], source="t"))
    climbing = [0.5e9, 0.7e9, 0.9e9, 1.1e9, 1.3e9]  # still warming up: never a figure to sign
    unsteady = dataclasses.replace(res, rounds=tuple(climbing), steady=check_steady_state(climbing, source="t"))
    decide = {name: evaluate_check(check, {"baseline": {"checkpoint": {"write_bw": checkpoint_leaf(r)}}}).verdict
              for name, r in (("steady", steady), ("unsteady", unsteady))}
    assert decide == {"steady": Verdict.PASS, "unsteady": Verdict.INCONCLUSIVE}


def test_checkpoint_read_back_with_odirect_when_cache_not_dropped(tmp_path: Path) -> None:
    spec = CheckpointSpec(size="4 MiB", files=2, writers=2, read_back=True)
    res = run_checkpoint_probe(
        LocalExecutor("n1"), _tier(tmp_path), spec, tmp_path / "out", drop_caches=False
    )
    assert res.read_back is not None
    assert (
        res.read_back.direct_io and not res.read_back.cache_dropped and not res.read_back.may_include_cached
    )
    assert "O_DIRECT" in res.read_back.how


def test_checkpoint_refusals(tmp_path: Path) -> None:
    ex = LocalExecutor("n1")
    target = _tier(tmp_path)
    small = StorageTarget(name="tier", path=target.path, min_free="1 PB")
    with pytest.raises(ProbeRefused, match="node n1, target tier: not enough free space"):
        run_checkpoint_probe(ex, small, CheckpointSpec(size="1 MiB", files=1, writers=1), tmp_path / "o")
    with pytest.raises(ProbeRefused, match="memory filesystem"):
        run_checkpoint_probe(
            ex,
            StorageTarget(name="m", path=target.path, kind="tmpfs"),
            CheckpointSpec(size="1 MiB", files=1, writers=1),
            tmp_path / "o",
        )
    assert list(Path(target.path).iterdir()) == []


def test_modelload_reads_a_weights_tree_with_odirect(tmp_path: Path) -> None:
    weights = tmp_path / "weights"
    (weights / "sub").mkdir(parents=True)
    sizes = {
        "model-00001.safetensors": 3 * MiB,
        "model-00002.safetensors": 2 * MiB + 123,
        "sub/config.json": 517,
    }
    for name, size in sizes.items():
        (weights / name).write_bytes(os.urandom(size))
    res = run_modelload_probe(
        LocalExecutor("n1"), str(weights), ModelLoadSpec(readers=2, max_rounds=5), tmp_path / "out",
        drop_caches=False
    )
    assert res.files == 3 and res.total_bytes == sum(sizes.values())
    assert res.direct_io and not res.may_include_cached and not res.synthetic
    assert res.read_bw_bytes == pytest.approx(res.total_bytes / res.total_s)
    assert sorted(p.name for p in weights.rglob("*") if p.is_file()) == sorted(Path(n).name for n in sizes)


def test_direct_reads_land_in_the_emulators_huge_page_buffers(tmp_path: Path) -> None:
    # the helper carries harness.readbuffer's class itself (not a copy that could drift from it)
    assert inspect.getsource(ReadBuffer) in SCRIPT
    data = tmp_path / "shards"
    data.mkdir()
    for i in range(3):
        (data / f"s{i}.bin").write_bytes(os.urandom(2 * MiB))
    py = find_python(LocalExecutor("n1"), "python3")
    out = run_helper(LocalExecutor("n1"), py, ["read", "direct", "3", str(2 * MiB), str(data)], target="t")
    assert out["all_direct"] is True and out["total_bytes"] == 6 * MiB
    assert out["buffers_on_huge_page"] is True  # every reader's buffer starts on a 2 MiB boundary


def test_modelload_synthetic_shards(tmp_path: Path) -> None:
    target = _tier(tmp_path)
    res = run_modelload_probe(
        LocalExecutor("n1"), target, ModelLoadSpec(readers=2, synthetic_size="16 MiB", max_rounds=5), tmp_path / "out"
    )
    assert res.synthetic and res.total_bytes == 16 * MiB and res.files == 2
    assert res.cache_dropped == ROOT and not res.may_include_cached
    assert list(Path(target.path).iterdir()) == []
    assert json.loads(res.evidence.read_text())["write"]["total_bytes"] == 16 * MiB
    assert modelload_leaf(res)["value"] == res.read_bw_bytes
    # a read that may include cached data is never counted as storage bandwidth
    cached = dataclasses.replace(res, may_include_cached=True, how="O_DIRECT refused, not root")
    leaf = modelload_leaf(cached)
    assert leaf["value"] is None and "not counted as storage" in str(leaf["detail"])


def test_modelload_is_read_in_rounds_after_a_drain_and_decided_on_their_interval(tmp_path: Path) -> None:
    spec = ModelLoadSpec(readers=2, synthetic_size="8 MiB", max_rounds=5)
    # O_DIRECT rounds: a cache drop before each (root) is test_modelload_synthetic_shards' part
    res = run_modelload_probe(LocalExecutor("n1"), _tier(tmp_path), spec, tmp_path / "out", drop_caches=False)
    assert len(res.rounds) == 5 and res.read_bw_bytes == pytest.approx(statistics.median(res.rounds))
    assert res.drain is not None and res.drain.drained and res.steady is not None
    evidence = json.loads(res.evidence.read_text())
    assert [r["bw_bytes"] for r in evidence["rounds"]] == pytest.approx(list(res.rounds))
    assert evidence["read"]["total_bytes"] == res.total_bytes and evidence["drain"]["drained"] is True
    leaf = modelload_leaf(res)
    assert leaf["samples"] == {"kind": "percentile", "x": list(res.rounds), "q": 50}
    assert ("inconclusive" in leaf) is (not res.steady.steady)
    check = load_gate(ROOT_DIR / "gates" / "G2.yaml").check("model_load")
    flat = [1.0e9, 1.01e9, 0.99e9, 1.0e9, 1.02e9]
    climbing = [0.5e9, 0.7e9, 0.9e9, 1.1e9, 1.3e9]  # the cache still warming or the device waking: no figure
    steady = dataclasses.replace(res, rounds=tuple(flat), steady=check_steady_state(flat, source="t"))
    unsteady = dataclasses.replace(res, rounds=tuple(climbing), steady=check_steady_state(climbing, source="t"))
    undrained = dataclasses.replace(steady, drain=dataclasses.replace(res.drain, drained=False))
    decide = {name: evaluate_check(check, {"baseline": {"modelload": {"read_bw": modelload_leaf(r)}}}).verdict
              for name, r in (("steady", steady), ("unsteady", unsteady), ("undrained", undrained))}
    assert decide == {"steady": Verdict.PASS, "unsteady": Verdict.INCONCLUSIVE, "undrained": Verdict.INCONCLUSIVE}


def test_one_round_that_may_be_cached_keeps_the_whole_load_out_of_the_figures(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the median round may be a cold one; a load with any round served from the page cache is not signable
    real, calls = modelload_module.cold_read, []

    def third_round_cached(*args: Any, **kwargs: Any) -> tuple[ColdRead, dict[str, Any]]:
        read, ev = real(*args, **kwargs)
        calls.append(read)
        if len(calls) == 3:
            read = dataclasses.replace(read, may_include_cached=True, how="O_DIRECT refused, not root")
        return read, ev

    monkeypatch.setattr(modelload_module, "cold_read", third_round_cached)
    spec = ModelLoadSpec(readers=2, synthetic_size="4 MiB", max_rounds=5)
    res = run_modelload_probe(LocalExecutor("n1"), _tier(tmp_path), spec, tmp_path / "out", drop_caches=False)
    assert len(calls) == len(res.rounds) >= 5 and res.may_include_cached
    leaf = modelload_leaf(res)
    assert leaf["value"] is None and "not counted as storage" in str(leaf["detail"])


def test_modelload_input_errors(tmp_path: Path) -> None:
    ex = LocalExecutor("n1")
    with pytest.raises(ProbeRefused, match="does not exist on the node"):
        run_modelload_probe(ex, str(tmp_path / "none"), ModelLoadSpec(), tmp_path / "o")
    with pytest.raises(InputError, match="needs a storage target"):
        run_modelload_probe(ex, str(tmp_path), ModelLoadSpec(synthetic_size="1 MiB"), tmp_path / "o")


def test_read_marked_may_include_cached_when_odirect_is_refused(tmp_path: Path) -> None:
    # procfs refuses O_DIRECT (EINVAL): the helper falls back to a buffered read and says so
    ex = LocalExecutor("n1")
    py = find_python(ex)
    raw = run_helper(ex, py, ["read", "direct", "1", str(MiB), "/proc/version"], target=None)
    assert raw["all_direct"] is False and "O_DIRECT refused" in raw["notes"][0]
    read, _ = cold_read(ex, py, ["/proc/version"], 1, target=None, drop_caches=False)
    assert read.may_include_cached and not read.direct_io and "O_DIRECT refused" in read.how


@pytest.fixture
def ssh_node(shared_ssh_cluster: SshCluster) -> Iterator[Executor]:
    ex = executor_for(shared_ssh_cluster.inventory, shared_ssh_cluster.nodes[0].name)
    try:
        yield ex
    finally:
        ex.close()


@pytest.mark.ssh
def test_checkpoint_and_modelload_over_ssh(ssh_node: Executor, tmp_path: Path) -> None:
    target = _tier(tmp_path)
    ck = run_checkpoint_probe(
        ssh_node, target, CheckpointSpec(size="8 MiB", files=4, writers=2, read_back=True), tmp_path / "out"
    )
    assert ck.node == ssh_node.node and ck.total_bytes == 8 * MiB and ck.read_back is not None
    ml = run_modelload_probe(
        ssh_node, target, ModelLoadSpec(readers=2, synthetic_size="8 MiB", max_rounds=5), tmp_path / "out"
    )
    assert ml.total_bytes == 8 * MiB and not ml.may_include_cached
    assert list(Path(target.path).iterdir()) == []


def test_a_direct_checkpoint_writes_with_odirect_and_says_each_round(tmp_path: Path) -> None:
    """``direct: true`` (the demo's, so its provisioned write rate caps it): O_DIRECT from aligned
    buffers, every round said as it ends (no silent stretch), sizes that O_DIRECT cannot write refused."""
    heard: list[str] = []
    spec = CheckpointSpec(size="8 MiB", files=2, writers=2, max_rounds=5, direct=True)
    res = run_checkpoint_probe(LocalExecutor("n1"), _tier(tmp_path), spec, tmp_path / "out", on_round=heard.append)
    assert res.total_bytes == 8 * MiB and json.loads(res.evidence.read_text())["write"]["mode"] == "direct"
    assert len(heard) == len(res.rounds) and heard[0].startswith("snapshot writes round 1 of at most 5: ")
    assert "MB/s" in heard[0] and ("within bounds" in heard[-1] or "exceeds" in heard[-1])
    (tmp_path / "b").mkdir()
    with pytest.raises(ProbeRefused, match="multiple of 4 KiB"):
        run_checkpoint_probe(LocalExecutor("n1"), _tier(tmp_path / "b"), CheckpointSpec(
            size="1000 KiB", files=3, writers=1, direct=True), tmp_path / "o")


def test_a_model_load_says_each_round(tmp_path: Path) -> None:
    heard: list[str] = []
    res = run_modelload_probe(LocalExecutor("n1"), _tier(tmp_path), ModelLoadSpec(
        readers=2, synthetic_size="8 MiB", max_rounds=5), tmp_path / "out", drop_caches=False, on_round=heard.append)
    assert [line.split(":")[0] for line in heard] == [f"cold reads round {i + 1} of at most 5"
                                                       for i in range(len(res.rounds))]
