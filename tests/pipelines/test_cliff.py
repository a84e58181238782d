"""The capacity-cliff sweep: tier sizes from the profile, refused inputs, the check that cannot
pass on missing or wrong evidence, and the demo cliff profile run end to end against the KV
emulator (real HTTP server, real tier files). The end-to-end run happens once per module (tens of
seconds on two cores); the cliff charts are checked in headless Chromium by tests/report/test_browser.py."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cli.main import run
from harness.config.loader import load_profile
from harness.errors import InputError
from harness.pipelines.cliff.run import _check, _observation, check_cliff_inputs, tier_capacities
from harness.ports import free_port
from harness.store.schema import Verdict

REPO = Path(__file__).resolve().parents[2]
DEMO_CLIFF = REPO / "profiles" / "demo-cliff.yaml"


def _profile(tmp_path: Path, **changes: Any) -> Path:
    data = yaml.safe_load(DEMO_CLIFF.read_text())
    data["engine"]["port"] = free_port()
    for key, value in changes.items():
        data[key] = value
    path = tmp_path / "cliff.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# --- tier sizes and inputs (no engine) ------------------------------------------------------------
def test_tier_sizes_of_the_demo_cliff_profile_are_the_emulators() -> None:
    prof = load_profile(DEMO_CLIFF)
    caps = tier_capacities(prof, prof.arm("cpu-disk"))
    # tiny geometry 2,048 B/token x 256 x kv_scale 1/8 = 64 KiB chunk files
    assert {t: c["tokens"] for t, c in caps.items()} == {"hbm": 2048, "local_cpu": 24 * 256, "local_disk": 65 * 256}
    assert set(tier_capacities(prof, prof.arm("hbm-only"))) == {"hbm"}
    # the sweep reaches well below and several times past every tier
    tokens = [n * prof.cliff.prefix_len for n in prof.cliff.prefixes]  # type: ignore[union-attr]
    assert tokens[0] < 2048 and tokens[-1] >= 2 * 65 * 256 and tokens[-1] >= 6 * 24 * 256


def test_a_real_engines_hbm_is_unsized_and_its_tiers_are_per_rank(tmp_path: Path) -> None:
    data = yaml.safe_load(DEMO_CLIFF.read_text())
    data["engine"] = {"kind": "vllm"}
    data["model"] = {"name": "m", "preset": "llama-3-8b", "tensor_parallel_size": 2}
    data["arms"][1]["lmcache"] = {"local_cpu": True, "max_local_cpu_size": 1, "max_local_disk_size": 4}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    prof = load_profile(path)
    caps = tier_capacities(prof, prof.arm("cpu-disk"))
    assert caps["hbm"]["tokens"] is None
    per_rank_token = 131072 / 2  # llama-3-8b: 32 x 8 x 128 x 2 B x 2 = 128 KiB/token, half per rank
    assert caps["local_cpu"]["tokens"] == int(2**30 // (per_rank_token * 256)) * 256
    assert caps["local_disk"]["tokens"] == int(2 * 2**30 // (per_rank_token * 256)) * 256  # 4 GB over 2 ranks


def test_inputs_are_refused_naming_the_field(tmp_path: Path) -> None:
    no_cliff = load_profile(REPO / "profiles" / "demo.yaml")
    with pytest.raises(InputError, match="no 'cliff' section"):
        check_cliff_inputs(no_cliff, "demo.yaml")
    for cliff, msg in (({"prefixes": [1, 2], "prefix_len": 1000}, "cliff.prefix_len 1000"),
                       ({"prefixes": [1, 2], "suffix_len": 256}, "cliff.suffix_len 256"),
                       ({"prefixes": [1, 2], "arms": ["nope"]}, "cliff.arms: 'nope'")):
        prof = load_profile(_profile(tmp_path, cliff=cliff))
        with pytest.raises(InputError, match=msg):
            check_cliff_inputs(prof, "p.yaml")
    assert run(["cliff", "--inventory", str(REPO / "inventory" / "localhost.yaml"), "--profile",
                str(REPO / "profiles" / "demo.yaml"), "--reports", str(tmp_path / "r"), "--no-progress"]) == 2
    assert not (tmp_path / "r").exists()  # refused before anything was created


def test_expected_reuse_uses_the_largest_tier_and_records_the_disjoint_bound() -> None:
    from harness.load.hashtrace import working_set_trace
    from harness.pipelines.cliff.run import _expected

    caps = {"hbm": {"tokens": 2 * 4}, "local_cpu": {"tokens": 4 * 4}, "local_disk": {"tokens": 10 * 4}}
    reqs, pop = working_set_trace(prefixes=4, prefix_blocks=2, block_size=4, suffix_len=1)  # 8 blocks
    exp = _expected(reqs, pop, 4, caps)
    assert exp["tier"] == "local_disk" and exp["hit_rate"] == 8 / 9 and exp["by_tier"]["hbm"] == 0.0
    reqs, pop = working_set_trace(prefixes=7, prefix_blocks=2, block_size=4, suffix_len=1)  # 14 > 10 blocks
    exp = _expected(reqs, pop, 4, caps)
    assert exp["hit_rate"] == 0.0 and exp["exclusive_hit_rate"] == 8 / 9  # 2 + 4 + 10 = 16 blocks hold 14
    # an unbounded disk: nothing to bound the LRU, every full block is reused
    unbounded = {**caps, "local_disk": {"tokens": None}}
    assert _expected(reqs, pop, 4, unbounded)["hit_rate"] == 8 / 9
    assert _expected(reqs, pop, 4, {"hbm": {"tokens": None}})["hit_rate"] is None  # nothing sized


def _point(measured: float | None, expected: float | None, **kw: Any) -> dict[str, Any]:
    return {"prefixes": 4, "measured_hit_rate": measured, "completed": 8, "failed": 0, "evidence": [],
            "expected": {"hit_rate": expected, "tier": "local_disk"}, **kw}


def test_the_check_passes_only_on_measured_counters_that_match() -> None:
    ok = _observation("a", 4, _point(0.97, 0.985), None)
    assert ok.verdict is Verdict.PASS
    # the scenarios that would make it PASS wrongly
    off = _observation("a", 4, _point(0.40, 0.985), None)  # a tier smaller than configured
    assert off.verdict is Verdict.FAIL and "points from the expected" in off.reason
    no_counters = _observation("a", 4, _point(None, 0.0), None)  # "0 hits expected" and nothing measured
    assert no_counters.verdict is Verdict.NOT_RUN
    failed = _observation("a", 4, _point(0.0, 0.0, failed=8, completed=0), None)  # errors look like misses
    assert failed.verdict is Verdict.NOT_RUN
    unsized = _observation("a", 4, _point(0.5, None), None)
    assert unsized.verdict is Verdict.NOT_RUN
    # measured before the populate pass's stores landed: a figure that happens to match, or not
    late = "lmcache:num_stored_tokens reached 2048 of 4096 before the measurement"
    for measured in (0.985, 0.40):
        unsettled = _observation("a", 4, _point(measured, 0.985, settled=False, settle=late), None)
        assert unsettled.verdict is Verdict.NOT_RUN
        assert "had not landed" in unsettled.reason and late in unsettled.reason
    assert _observation("a", 4, _point(0.97, 0.985, settled=True), None).verdict is Verdict.PASS
    missing = _observation("a", 8, None, "arm a stopped at 4 prefixes: engine died")
    assert missing.verdict is Verdict.NOT_RUN and missing.caused_by_fault
    assert _check([ok, ok]).verdict is Verdict.PASS
    assert _check([ok, off, missing]).verdict is Verdict.FAIL
    assert _check([ok, no_counters]).verdict is Verdict.NOT_RUN
    assert _check([]).verdict is Verdict.NOT_RUN


# --- the demo cliff profile, end to end -----------------------------------------------------------
@pytest.fixture(scope="module")
def cliff_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("cliff")
    tier = tmp / "fast-disk"
    tier.mkdir()
    inv = tmp / "inventory.yaml"
    inv.write_text(yaml.safe_dump({
        "cluster": "cliff-local", "defaults": {"workdir": str(tmp / "work")},
        "nodes": [{"name": "local", "host": "localhost", "connection": "local", "roles": ["server", "client"],
                   "storage": [{"name": "fast-disk", "path": str(tier)}]}]}))
    prof = _profile(tmp)
    reports = tmp / "reports"
    code = run(["cliff", "--inventory", str(inv), "--profile", str(prof), "--reports", str(reports),
                "--campaign", "cl", "--no-progress"])
    gate_dir = reports / "cl" / "cliff"
    yield {"code": code, "dir": gate_dir, "result": json.loads((gate_dir / "result.json").read_text()),
           "tier": tier}


def test_demo_cliff_hit_rate_falls_past_each_tier_and_matches_the_expected_reuse(cliff_run: dict[str, Any]) -> None:
    res = cliff_run["result"]
    arms = res["measurements"]["cliff"]["arms"]
    # on failure: whether each point's populate stores landed before its measurement, and the notes
    settles = {(name, p["prefixes"]): (p.get("settle"), p.get("stored_before"), p.get("stored_after"))
               for name, arm in arms.items() for p in arm["points"]}
    assert cliff_run["code"] == 0 and res["verdict"] == "PASS", (res["verdict_reason"], settles, res.get("notes"))
    for name, arm in arms.items():
        bounds = arm["boundaries"]
        largest = max(b["tokens"] for b in bounds.values())
        for p in arm["points"]:
            exp, measured = p["expected"]["hit_rate"], p["measured_hit_rate"]
            assert abs(measured - exp) <= 0.05, (name, p["prefixes"], measured, exp)  # both per point
            assert p["completed"] == p["prefixes"] and p["failed"] == 0
            # below the largest tier nearly every prompt token is reused; past it, none is
            assert (measured > 0.9) if p["tokens"] <= largest else (measured < 0.05), (name, p["tokens"])
    cpu_disk = {p["prefixes"]: p["rates"] for p in arms["cpu-disk"]["points"]}
    assert cpu_disk[1]["hbm"] > 0.9  # fits HBM
    assert cpu_disk[3]["hbm"] == 0 and cpu_disk[3]["local_cpu"] > 0.9  # past HBM, within the CPU tier
    assert cpu_disk[12]["local_disk"] > 0.3  # past the CPU tier: the disk serves
    hbm_only = {p["prefixes"]: p["rates"] for p in arms["hbm-only"]["points"]}
    assert hbm_only[1]["total"] > 0.9 and hbm_only[3]["total"] == 0  # no offload: the cliff is at HBM
    # the trace of every point is kept in Mooncake format; the KV files were removed at the end
    trace = cliff_run["dir"] / arms["cpu-disk"]["points"][-1]["evidence"][0]
    assert json.loads(trace.read_text().splitlines()[0]).keys() == {"timestamp", "input_length", "output_length",
                                                                    "hash_ids"}
    assert not list(cliff_run["tier"].rglob("*.kvchunk"))
    assert [r["point"] for r in res["measurements"]["tier_hits"]["cpu-disk"]] == \
        [f"{n} prefixes" for n in (1, 3, 12, 40)]


def test_demo_cliff_report_marks_the_tier_boundaries(cliff_run: dict[str, Any]) -> None:
    html = (cliff_run["dir"] / "report.html").read_text()
    bpt = cliff_run["result"]["measurements"]["cliff"]["kv_bytes_per_token"]
    for tier, tokens in (("hbm", 2048), ("local_cpu", 6144), ("local_disk", 16640)):
        assert f'data-tier="{tier}" data-bytes="{tokens * bpt}"' in html
    assert 'id="chart-cliff-hits-0"' in html and 'id="chart-cliff-ttft"' in html
    assert 'id="cliff"' in html and 'id="tier-hits-cpu-disk"' in html
    assert (cliff_run["dir"] / "MANIFEST.sha256").is_file()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)  # self-contained



def test_an_engine_that_does_not_start_is_a_fault_with_exit_4(tmp_path: Path) -> None:
    tier = tmp_path / "fast-disk"
    tier.mkdir()
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({
        "cluster": "cliff-local", "defaults": {"workdir": str(tmp_path / "work")},
        "nodes": [{"name": "local", "host": "localhost", "connection": "local", "roles": ["server", "client"],
                   "storage": [{"name": "fast-disk", "path": str(tier)}]}]}))
    data = yaml.safe_load(_profile(tmp_path).read_text())
    data["cliff"]["arms"] = ["cpu-disk"]
    data["engine"]["ready_timeout"] = "5s"
    prof = tmp_path / "bad.yaml"
    prof.write_text(yaml.safe_dump(data))
    reports = tmp_path / "reports"
    with socket.socket() as busy:  # another program holds the engine's port: it cannot start
        busy.bind(("127.0.0.1", data["engine"]["port"]))
        busy.listen()
        code = run(["cliff", "--inventory", str(inv), "--profile", str(prof), "--reports", str(reports),
                    "--campaign", "f", "--no-progress"])
    res = json.loads((reports / "f" / "cliff" / "result.json").read_text())
    assert code == 4 and res["verdict"] != "PASS" and res["faults"]
    obs = res["checks"][0]["observations"]
    assert len(obs) == 4 and all(o["verdict"] == "NOT_RUN" and o["caused_by_fault"] for o in obs)
    assert (reports / "f" / "cliff" / "report.html").is_file()


def test_a_point_whose_populate_stores_never_land_is_marked_unsettled(monkeypatch: pytest.MonkeyPatch) -> None:
    """_settle, the producer of ``settled``: a store counter short of the populate pass's tokens at
    the bound marks the point unsettled (then NOT_RUN, above); one that reaches them, settled."""
    from types import SimpleNamespace

    from harness.pipelines.cliff import run as cliff

    class Snap:
        def __init__(self, stored: float) -> None:
            self.stored = stored

        def value(self, name: str) -> float | None:
            return self.stored if name == cliff.STORED else None

    arm = SimpleNamespace(name="cpu-disk", offload=True)
    monkeypatch.setattr(cliff, "SETTLE_S", 0.0)
    for stored, settled in ((2048.0, False), (4096.0, True)):
        monkeypatch.setattr(cliff, "_scrape", lambda *_a, s=stored: [Snap(s)])
        run = SimpleNamespace(notes=[])
        point: dict[str, Any] = {"prefixes": 4, "stored_before": 0.0}
        cliff._settle(run, None, [], arm, 4096, point)  # type: ignore[arg-type]
        assert point["settled"] is settled, point
        assert bool(run.notes) is not settled
