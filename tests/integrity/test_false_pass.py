"""False-PASS regression suite: every scenario of issue 11, end to end through the CLI.

Each scenario is one that passed (exit 0) on the wrong evidence before; each must now exit
non-zero with a message that names the cause. The emulator is the engine (its storage I/O is
real); one G1+G2 baseline campaign per session is copied for each G3 scenario to keep the suite
fast (tests/support/campaign.py).
"""

from __future__ import annotations

import copy
import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cli.main import run
from harness.ports import free_port
from tests.pipelines.conftest import small_profile
from tests.support.background import Background, files_now
from tests.support.campaign import PassedBaseline

pytestmark = [pytest.mark.fio, pytest.mark.slow]


# These scenarios are about the measurement, not custody: the session's baseline is unsigned, so they
# compare against it as a rehearsal would (issue 27's custody checks: tests/integrity/test_custody.py).
REHEARSAL = "--allow-unsigned-baseline"
FROM_BASE = ("--baseline", "base", REHEARSAL)


def kvgate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = run([*argv, "--no-progress"])
    out = capsys.readouterr()
    return code, out.out + out.err


def gate_argv(gate: str, inv: Path, prof: Path, reports: Path, campaign: str, *extra: str) -> list[str]:
    return ["gate", gate, "--inventory", str(inv), "--profile", str(prof), "--campaign", campaign,
            "--reports", str(reports), *extra]


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def result(reports: Path, campaign: str, gate: str) -> dict[str, Any]:
    return json.loads((reports / campaign / gate / "result.json").read_text())


def check(res: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in res["checks"] if c["id"] == check_id)


class Base:
    """A passed G1+G2 campaign ('base') the G3 scenarios compare against: the session's one real
    baseline run (``passed_baseline``), copied into this test's own directory with its own tier."""

    def __init__(self, root: Path, shared: PassedBaseline) -> None:
        self.root = root
        self.shared = shared
        tier = root / "tier"
        tier.mkdir(parents=True)
        self.inv = write(root / "inventory.yaml", {
            "cluster": "integrity", "defaults": {"workdir": str(root / "work")},
            "nodes": [{"name": "local", "host": "localhost", "connection": "local", "roles": ["server", "client"],
                       "storage": [{"name": "tier", "path": str(tier)}]}]})
        self.port = free_port()
        self.profile_data = shared.profile(self.port)
        self.prof = write(root / "profile.yaml", self.profile_data)
        self.reports = root / "reports"
        shared.copy_into(self.reports, "base", whole=True)

    def campaign(self, name: str, prof: Path | None = None) -> str:
        """A scenario's campaign, started with this inventory and ``prof`` (default: the base
        profile), with the passed G1 every campaign that runs G3 needs (issue 27), of its own id."""
        if not (self.reports / name / "G1").exists():
            self.shared.copy_into(self.reports, name, gates=("G1",), started_with=(self.inv, prof or self.prof))
        return name

    def profile(self, name: str, **changes: Any) -> Path:
        data = copy.deepcopy(self.profile_data)
        for key, value in changes.items():
            data[key] = value
        return write(self.root / f"{name}.yaml", data)


@pytest.fixture
def base(tmp_path: Path, passed_baseline: PassedBaseline) -> Base:
    return Base(tmp_path / "integrity", passed_baseline)


def test_cross_campaign_workload_mismatch_is_refused(base: Base, capsys: pytest.CaptureFixture[str]) -> None:
    load = {**base.profile_data["load"], "input_len": 256}
    prof = base.profile("short", load=load)
    camp = base.campaign("mismatch", prof)
    code, out = kvgate(capsys, *gate_argv("G3", base.inv, prof, base.reports, camp, *FROM_BASE))
    assert code == 2, out
    assert "load.input_len: baseline 2048, this run 256" in out
    assert not (base.reports / "mismatch" / "G3" / "result.json").exists()  # nothing was measured


def test_storage_less_candidate_is_an_input_error_with_file_and_line(
        base: Base, capsys: pytest.CaptureFixture[str]) -> None:
    arms = [base.profile_data["arms"][0], {"name": "candidate", "offload": False}]
    prof = base.profile("nostorage", arms=arms)
    camp = base.campaign("nostorage", prof)
    code, out = kvgate(capsys, *gate_argv("G3", base.inv, prof, base.reports, camp, *FROM_BASE))
    assert code == 2, out
    lines = prof.read_text().splitlines()
    cand_line = next(i for i, line in enumerate(lines, 1) if "name: candidate" in line)
    assert f"{prof}:{cand_line}" in out and "has no storage target" in out and "offload: false" in out


def test_tampered_baseline_is_refused(base: Base, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(base.reports / "base", base.reports / "tampered")
    state = base.reports / "tampered" / "G2" / "state.jsonl"
    lines = state.read_text().splitlines()
    rec = json.loads(lines[-1])
    rec["data"]["ttft_ms"] = [t * 10 for t in rec["data"]["ttft_ms"]]  # a slower baseline flatters the candidate
    state.write_text("\n".join(lines[:-1] + [json.dumps(rec)]) + "\n")
    code, out = kvgate(capsys, *gate_argv("G3", base.inv, base.prof, base.reports, base.campaign("t3"),
                                          "--baseline", "tampered", REHEARSAL))
    assert code == 2, out
    assert "failed verification" in out and "state.jsonl changed" in out


def test_candidate_with_no_offload_hits_fails_naming_the_check(
        base: Base, capsys: pytest.CaptureFixture[str]) -> None:
    # a disk tier too small for one chunk: every store fails, every measured request recomputes
    arms = [base.profile_data["arms"][0],
            {"name": "candidate", "storage": "tier", "lmcache": {"max_local_disk_size": 0.0001}}]
    prof = base.profile("nohits", arms=arms)
    camp = base.campaign("nohits", prof)
    code, out = kvgate(capsys, *gate_argv("G3", base.inv, prof, base.reports, camp, *FROM_BASE))
    res = result(base.reports, "nohits", "G3")
    assert code == 1 and res["verdict"] == "FAIL", out
    hits = check(res, "candidate_offload_hits")
    assert hits["verdict"] == "FAIL" and hits["observations"][0]["measured"] == 0
    assert "candidate_offload_hits" in res["verdict_reason"] and "candidate_offload_hits" in out


def test_prompt_kept_in_the_engine_prefix_cache_fails(base: Base, capsys: pytest.CaptureFixture[str]) -> None:
    # no cold restore: warm-up requests are measured again while the engine still holds them
    load = {**base.profile_data["load"], "cold_restore": False, "warmup": 6}
    engine = copy.deepcopy(base.profile_data["engine"])
    engine["sim"]["hbm_tokens"] = 65536
    prof = base.profile("warm", load=load, engine=engine)
    code, out = kvgate(capsys, *gate_argv(
        "G3", base.inv, prof, base.reports, base.campaign("warm", prof), *FROM_BASE,
        "--allow-baseline-mismatch", "load.cold_restore", "load.warmup", "engine.sim.hbm_tokens"))
    res = result(base.reports, "warm", "G3")
    assert code == 1, out
    evicted = check(res, "candidate_prefix_cache_evicted")
    assert evicted["verdict"] == "FAIL" and evicted["observations"][0]["measured"] > 0
    assert "candidate_prefix_cache_evicted" in res["verdict_reason"]
    # the accepted differences are recorded and printed in the report
    accepted = {a["field"] for a in res["baseline"]["accepted_mismatches"]}
    assert accepted == {"load.cold_restore", "load.warmup", "engine.sim.hbm_tokens"}
    assert "load.cold_restore" in (base.reports / "warm" / "G3" / "report.html").read_text()


NO_ARMS = [{"name": "baseline", "offload": False}, {"name": "candidate", "offload": False}]  # G1 runs no arm


def _g1_inventory(root: Path, nodes: list[dict[str, Any]]) -> Path:
    return write(root / "inv-g1.yaml", {"cluster": "g1", "defaults": {
        "workdir": str(root / "work"), "known_hosts": str(root / "known_hosts"), "connect_timeout": "3s",
        "user": "root"}, "nodes": nodes})


def test_one_node_unreachable_leaves_its_rows_not_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "known_hosts").write_text("")
    t1 = tmp_path / "t1"
    t1.mkdir()
    inv = _g1_inventory(tmp_path, [
        {"name": "up", "host": "localhost", "connection": "local", "storage": [{"name": "t1", "path": str(t1)}]},
        {"name": "ghost", "host": "127.0.0.1", "port": free_port(),
         "storage": [{"name": "t2", "path": "/srv/kv"}]}])
    prof = write(tmp_path / "p.yaml", small_profile(free_port(), arms=NO_ARMS))
    code, out = kvgate(capsys, *gate_argv("G1", inv, prof, tmp_path / "r", "u"))
    res = result(tmp_path / "r", "u", "G1")
    assert code == 4, out
    assert "ghost" in res["verdict_reason"] or any("ghost" in f for f in res["faults"])
    for cid in ("target_mounted", "fio_read"):
        c = check(res, cid)
        assert c["verdict"] == "NOT_RUN", (cid, c["verdict"])  # the node that answered does not speak for both
        ghost = [o for o in c["observations"] if ".ghost." in o["path"]]
        assert ghost and ghost[0]["verdict"] == "NOT_RUN"


def test_target_left_out_of_fio_is_not_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "known_hosts").write_text("")
    t1, t2 = tmp_path / "t1", tmp_path / "t2"
    t1.mkdir()
    t2.mkdir()
    inv = _g1_inventory(tmp_path, [{"name": "local", "host": "localhost", "connection": "local",
                                    "storage": [{"name": "t1", "path": str(t1)}, {"name": "t2", "path": str(t2)}]}])
    data = small_profile(free_port(), arms=NO_ARMS)
    data["probes"]["fio"]["targets"] = ["t1"]
    prof = write(tmp_path / "p.yaml", data)
    code, out = kvgate(capsys, *gate_argv("G1", inv, prof, tmp_path / "r", "f"))
    res = result(tmp_path / "r", "f", "G1")
    assert code == 1, out
    fio = check(res, "fio_read")
    assert fio["verdict"] == "NOT_RUN"
    left = next(o for o in fio["observations"] if ".t2." in o["path"])
    assert left["verdict"] == "NOT_RUN" and "left out by the profile" in left["reason"]
    assert any("not probed: t2" in n for n in res["notes"])


def test_all_blockers_not_applicable_decides_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    # a gate file whose only blocker has nothing to check on a CPU node
    write(gates / "G1.yaml", {"id": "G1", "title": "Accelerators only", "checks": [
        {"id": "accelerators", "description": "accelerators as in the inventory",
         "metric": "nodes.*.accelerators.match", "comparator": "is_true", "severity": "blocker"}]})
    t1 = tmp_path / "t1"
    t1.mkdir()
    (tmp_path / "known_hosts").write_text("")
    inv = _g1_inventory(tmp_path, [{"name": "local", "host": "localhost", "connection": "local",
                                    "storage": [{"name": "t1", "path": str(t1)}]}])
    prof = write(tmp_path / "p.yaml", small_profile(free_port(), arms=NO_ARMS))
    code, out = kvgate(capsys, *gate_argv("G1", inv, prof, tmp_path / "r", "na", "--gates", str(gates)))
    res = result(tmp_path / "r", "na", "G1")
    assert code == 1 and res["verdict"] == "NOT_RUN", out
    assert check(res, "accelerators")["verdict"] == "NOT_APPLICABLE"
    assert "no applicable blocker" in res["verdict_reason"]
    junit = (tmp_path / "r" / "na" / "G1" / "junit.xml").read_text()
    assert 'failures="1"' in junit and "no applicable blocker" in junit


def test_corrupted_chunk_files_fail_output_identity(base: Base, capsys: pytest.CaptureFixture[str]) -> None:
    kv_dir = Path(base.root / "tier")
    done: set[Path] = set()

    def corrupt(stop: threading.Event) -> None:
        # flip bytes in the body of every chunk file the candidate stores, between its populate
        # pass and its measurement (the 4 KiB header, which names the chunk, is kept); fio's
        # probe creates and removes its own directories under the tier meanwhile
        while not stop.is_set():
            for path in files_now(kv_dir, ".kvchunk"):
                if path in done:
                    continue
                try:
                    with open(path, "r+b") as fh:
                        fh.seek(8192)
                        block = fh.read(64)
                        fh.seek(8192)
                        fh.write(bytes(b ^ 0xFF for b in block))
                    done.add(path)
                except OSError:
                    continue
            stop.wait(0.005)

    with Background(corrupt, name="chunk-corrupter"):
        code, out = kvgate(capsys, *gate_argv("G3", base.inv, base.prof, base.reports, base.campaign("corrupt"),
                                              *FROM_BASE))
    res = result(base.reports, "corrupt", "G3")
    assert done, "no chunk file was stored"
    assert code == 1 and res["verdict"] == "FAIL", out
    ident = check(res, "output_identity")
    assert ident["verdict"] == "FAIL" and ident["observations"][0]["measured"] > 0.1  # divergence rate
    assert "output_identity" in res["verdict_reason"] and "differ" in ident["observations"][0]["reason"]
    # the tier did serve the (corrupted) chunks: the counters alone would have called it a cold restore
    assert check(res, "candidate_offload_hits")["verdict"] == "PASS"
