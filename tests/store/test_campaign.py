"""The campaign store on real files: layout, lock, resume state, result files, kill -9 durability."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.remote.base import RunResult
from harness.store import durable
from harness.store.campaign import Campaign, CampaignError, CampaignLocked, ResultFileError, load_result
from harness.store.schema import GateResult, Verdict

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    inv = tmp_path / "inv.yaml"
    prof = tmp_path / "prof.yaml"
    inv.write_text("cluster: test\n")
    prof.write_text("name: demo\n")
    return inv, prof


def _result(gate: str = "G1", note: str = "") -> GateResult:
    return GateResult(gate=gate, title="t", campaign="c", verdict=Verdict.PASS, exit_code=0,
                      started_at="2026-01-01T00:00:00Z", finished_at="2026-01-01T00:01:00Z",
                      kvgate_version="0.1.0", notes=[note] if note else [])


def test_new_campaign_records_inputs_version_and_commit(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    inv, prof = inputs
    reports = tmp_path / "reports"
    with Campaign.open(reports, "c1", inventory_path=inv, profile_path=prof, operator="alice") as c:
        assert not c.resumed
    meta = json.loads((tmp_path / "reports" / "c1" / "campaign.json").read_text())
    assert meta["inventory"]["text"] == "cluster: test\n"
    assert meta["inventory"]["sha256"] == hashlib.sha256(b"cluster: test\n").hexdigest()
    assert meta["profile"]["sha256"] == hashlib.sha256(b"name: demo\n").hexdigest()
    assert meta["operator"] == "alice" and meta["kvgate_version"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    if head.returncode == 0:
        assert meta["git_commit"] == head.stdout.strip()
    assert meta["started_at"].endswith("Z")


def test_resume_refuses_a_different_profile(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    inv, prof = inputs
    Campaign.open(tmp_path, "c", inventory_path=inv, profile_path=prof).close()
    with Campaign.open(tmp_path, "c", inventory_path=inv, profile_path=prof) as c:
        assert c.resumed
    prof.write_text("name: other\n")
    with pytest.raises(CampaignError, match="profile .* differs"):
        Campaign.open(tmp_path, "c", inventory_path=inv, profile_path=prof)
    runs = durable.read_jsonl(tmp_path / "c" / "runs.jsonl")
    assert [r["resumed"] for r in runs] == [False, True]


def test_bad_names_and_missing_campaigns(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    inv, prof = inputs
    with pytest.raises(CampaignError, match="campaign name"):
        Campaign.open(tmp_path, "../evil", inventory_path=inv, profile_path=prof)
    with pytest.raises(CampaignError, match="no campaign"):
        Campaign.open(tmp_path, "absent", create=False)
    with pytest.raises(CampaignError, match="needs the inventory"):
        Campaign.open(tmp_path, "new")
    with Campaign.open(tmp_path, "c", inventory_path=inv, profile_path=prof) as c:
        g = c.gate_dir("G1")
        for bad in ("../x", "/etc/passwd", ""):
            with pytest.raises(CampaignError, match="relative path"):
                g.write_evidence(bad, "x")
        with pytest.raises(CampaignError, match="gate id"):
            c.gate_dir("G1/../..")


def test_second_writer_in_another_process_gets_the_holder_pid(tmp_path: Path,
                                                              inputs: tuple[Path, Path]) -> None:
    inv, prof = inputs
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from harness.store.campaign import Campaign
        c = Campaign.open(Path({str(tmp_path)!r}), "c", inventory_path=Path({str(inv)!r}),
                          profile_path=Path({str(prof)!r}))
        print("locked", flush=True)
        sys.stdin.read()
        c.close()
    """)
    holder = subprocess.Popen([sys.executable, "-c", code],  # noqa: S603 - our own test code
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(CampaignLocked, match=f"pid {holder.pid}"):
            Campaign.open(tmp_path, "c", inventory_path=inv, profile_path=prof)
        # a reader needs no lock
        assert Campaign.read(tmp_path, "c").meta["name"] == "c"
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)
        assert holder.stdout is not None
        holder.stdout.close()
    Campaign.open(tmp_path, "c", inventory_path=inv, profile_path=prof).close()


def test_evidence_commands_state_and_result(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    inv, prof = inputs
    with Campaign.open(tmp_path, "c", inventory_path=inv, profile_path=prof) as c:
        g = c.gate_dir("G3")
        rel = g.write_evidence("fio/node1-seq-read.json", b'{"jobs": []}')
        assert rel == "evidence/fio/node1-seq-read.json"
        assert g.append_jsonl("requests.jsonl", {"ttft": 0.1}) == "evidence/requests.jsonl"
        g.append_jsonl("requests.jsonl", {"ttft": 0.2})
        assert [r["ttft"] for r in g.read_jsonl("requests.jsonl")] == [0.1, 0.2]
        rr = RunResult(host="n1", command=("fio", "--version"), exit_code=0, stdout="fio-3.33\n", stderr="",
                       duration_s=0.01)
        g.record_command("n1", rr.command, rr)
        g.record_command("n2", ["nvme", "list"], error="Unreachable: n2")
        cmds = g.read_jsonl("commands.jsonl")
        assert cmds[0]["argv"] == ["fio", "--version"] and cmds[0]["exit_code"] == 0
        assert cmds[0]["stdout_tail"] == "fio-3.33\n" and cmds[1]["error"] == "Unreachable: n2"
        assert g.step_done("arm=baseline/c=8") is None
        g.mark_step_done("arm=baseline/c=8", {"records": "evidence/requests.jsonl"})
        g.mark_step_done("arm=baseline/c=16")
        assert g.step_done("arm=baseline/c=8") == {"records": "evidence/requests.jsonl"}
        assert g.step_done("arm=baseline/c=16") == {}
        assert g.steps_done() == ["arm=baseline/c=8", "arm=baseline/c=16"]
        with pytest.raises(ResultFileError, match="no result"):
            c.load_result("G3")
        g.write_result(_result("G3", "first"))
        g.write_result(_result("G3", "second"))
        assert c.load_result("G3").notes == ["second"]
        with pytest.raises(CampaignError, match="folder of G3"):
            g.write_result(_result("G1"))
    # state survives a new run: --resume skips completed steps
    with Campaign.open(tmp_path, "c", inventory_path=inv, profile_path=prof) as c:
        assert c.gate_dir("G3").step_done("arm=baseline/c=8") == {"records": "evidence/requests.jsonl"}


def test_unknown_schema_version_and_torn_result_are_refused(tmp_path: Path) -> None:
    p = tmp_path / "result.json"
    data = json.loads(_result().model_dump_json())
    data["schema_version"] = 2
    p.write_text(json.dumps(data))
    with pytest.raises(ResultFileError, match="schema_version 2"):
        load_result(p)
    good = _result().model_dump_json()
    p.write_text(good[: len(good) // 2])
    with pytest.raises(ResultFileError, match="not valid JSON"):
        load_result(p)
    data["schema_version"] = 1
    data["verdict"] = "MAYBE"
    p.write_text(json.dumps(data))
    with pytest.raises(ResultFileError, match="verdict"):
        load_result(p)


def test_torn_jsonl_line_is_skipped_and_the_next_append_is_clean(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    durable.append_jsonl(p, {"i": 0})
    with open(p, "ab") as f:
        f.write(b'{"i": 1, "pad": "xxxx')  # a crash in the middle of a write
    assert durable.read_jsonl(p) == [{"i": 0}]
    durable.append_jsonl(p, {"i": 2})
    assert durable.read_jsonl(p) == [{"i": 0}, {"i": 2}]


_WRITER = textwrap.dedent("""
    import hashlib, sys
    from pathlib import Path
    from harness.store.campaign import Campaign
    from harness.store.schema import GateResult, Verdict
    root, inv, prof = (Path(a) for a in sys.argv[1:4])
    c = Campaign.open(root, "c", inventory_path=inv, profile_path=prof)
    g = c.gate_dir("G2")
    start = 0
    for s in g.steps_done():
        start = max(start, int(s[1:]) + 1)
    print("ready", flush=True)
    i = start
    while True:
        pad = ("%08d" % i) * (1 + (i * 7919) % 20000)
        sha = hashlib.sha256(pad.encode()).hexdigest()
        g.append_jsonl("records.jsonl", {"i": i, "pad": pad, "sha": sha})
        g.write_evidence("blob-%d.txt" % (i % 3), sha + "\\n" + pad)
        g.write_result(GateResult(gate="G2", title="t", campaign="c", verdict=Verdict.PASS, exit_code=0,
                       started_at="s", finished_at="f", kvgate_version="0", notes=[str(i), pad[:5000], sha]))
        g.mark_step_done("s%d" % i, {"i": i, "sha": sha})
        i += 1
""")


def _check_consistent(gdir: Path) -> tuple[int, int]:
    """Everything read back is whole; returns (records, steps)."""
    records = durable.read_jsonl(gdir / "evidence" / "records.jsonl")
    for r in records:
        assert hashlib.sha256(r["pad"].encode()).hexdigest() == r["sha"], "half-written record read back"
    ids = [r["i"] for r in records]
    assert ids == sorted(ids)
    for blob in (gdir / "evidence").glob("blob-*.txt"):
        sha, pad = blob.read_text().split("\n", 1)
        assert hashlib.sha256(pad.encode()).hexdigest() == sha, f"torn evidence file {blob.name}"
    if (gdir / "result.json").exists():
        res = load_result(gdir / "result.json")
        i, head, sha = res.notes
        assert head == (f"{int(i):08d}" * (1 + (int(i) * 7919) % 20000))[:5000]
    steps = durable.read_jsonl(gdir / "state.jsonl")
    done = [int(s["step"][1:]) for s in steps]
    assert done == list(range(len(done))), "a step is missing or duplicated"
    # every step marked done has its record: the record was appended (and fsync'd) before the mark
    assert set(done) <= set(ids)
    return len(records), len(done)


def test_kill_9_at_random_points_never_leaves_half_written_data(tmp_path: Path,
                                                                inputs: tuple[Path, Path]) -> None:
    inv, prof = inputs
    rng = random.Random(2026)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    gdir = tmp_path / "c" / "G2"
    last_steps = 0
    kills = 8
    for _ in range(kills):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), str(inv), str(prof)],  # noqa: S603
                                stdout=subprocess.PIPE, env=env)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
            # progress first (complete lines of the step log; a loaded machine may need seconds for
            # one step), then the kill at a random point of the writer's loop
            state, deadline = gdir / "state.jsonl", time.monotonic() + 30
            while time.monotonic() < deadline and (
                    not state.exists() or state.read_bytes().count(b"\n") <= last_steps):
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.1))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            assert proc.stdout is not None
            proc.stdout.close()
        assert proc.returncode == -signal.SIGKILL
        _, steps = _check_consistent(gdir)
        assert steps >= last_steps  # resumed where it stopped, nothing lost that was marked done
        last_steps = steps
    assert last_steps >= kills  # the writer made progress in every round, resuming after each kill
    # the kernel released the dead writer's lock: a new run can take the campaign
    Campaign.open(tmp_path, "c", inventory_path=inv, profile_path=prof).close()
    assert not list(gdir.rglob(".*.tmp.*"))  # temporaries of killed writers are cleared on open


def test_recorded_commands_never_hold_secrets(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    inv, prof = inputs
    with Campaign.open(tmp_path, "c", inventory_path=inv, profile_path=prof) as c:
        g = c.gate_dir("G2")
        g.record_command("n1", ["vllm", "serve", "m", "--api-key", "sk-123", "--port", "8000",
                                "HF_TOKEN=hf_abc", "--password=pw"])
        argv = g.read_jsonl("commands.jsonl")[0]["argv"]
    assert argv == ["vllm", "serve", "m", "--api-key", "***", "--port", "8000", "HF_TOKEN=***",
                    "--password=***"]
    raw = (tmp_path / "c" / "G2" / "evidence" / "commands.jsonl").read_text()
    assert "sk-123" not in raw and "hf_abc" not in raw and "pw" not in raw.replace("password", "")


def test_appends_from_many_threads_stay_whole(tmp_path: Path) -> None:
    import threading

    p = tmp_path / "state.jsonl"
    pad = "x" * 70000  # larger than a pipe buffer: a torn interleave would show

    def writer(k: int) -> None:
        for i in range(20):
            durable.append_jsonl(p, {"k": k, "i": i, "pad": pad})
            durable.write_atomic(tmp_path / "same.json", json.dumps({"k": k, "i": i}))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    recs = durable.read_jsonl(p)
    assert len(recs) == 120 and all(r["pad"] == pad for r in recs)
    assert sorted((r["k"], r["i"]) for r in recs) == [(k, i) for k in range(6) for i in range(20)]
    assert json.loads((tmp_path / "same.json").read_text())["i"] == 19
