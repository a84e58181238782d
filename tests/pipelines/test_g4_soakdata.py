"""G4's measured results from soak files, evaluated against the shipped gates/G4.yaml.

Each scenario that could make a check PASS wrongly (a kernel log that could not be read, a
drive never sampled, a probe that failed at the end, too few windows...) is here with the
verdict it must get instead.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from harness.config.loader import load_gate
from harness.config.profile import ThresholdOverride
from harness.gates.evaluate import evaluate_gate
from harness.pipelines.g4.soakdata import side_leaf, soak_measured

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "facts"
SPEC = load_gate(ROOT / "gates" / "G4.yaml")
DURATION = ThresholdOverride(gate="G4", check="duration", threshold="60s", reason="compressed soak in a test")
T0 = 1_800_000_000.0
BENIGN = (DATA / "kernel_benign_dmesg.txt").read_text().splitlines()
SMART_OK = (DATA / "nvme_smart_log_v2.11.json").read_text()
SMART_BAD = (DATA / "nvme_smart_log_v1_media_errors.json").read_text()
MD_OK = (DATA / "proc_mdstat_healthy_raid0.txt").read_text()
MD_BAD = (DATA / "proc_mdstat_failed_member.txt").read_text()


def jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_soak(d: Path, *, n: int = 15, window: float = 4.0, ttft: Any = None, tput: Any = None,
               failed: int = 0, events: tuple[dict[str, Any], ...] = (), health: list[dict[str, Any]] | None = None,
               probe_end_text: str | None = "same", probe_end_status: str = "ok", done: bool = True,
               in_flight: Any = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    wins = []
    for i in range(n):
        wins.append({"index": i + 1, "started_unix": T0 + i * window, "ended_unix": T0 + (i + 1) * window,
                     "length_s": window, "requests": 60, "ok": 60 - (failed if i == n // 2 else 0),
                     "failed": failed if i == n // 2 else 0, "cancelled": 0,
                     "failures": {"connect": failed} if failed and i == n // 2 else {},
                     "ttft_p50_ms": ttft(i) if ttft else 80.0 + (i % 3), "ttft_p99_ms": 150.0,
                     "throughput_tok_s": tput(i) if tput else 240.0 - (i % 2),
                     "mean_in_flight": in_flight(i) if in_flight else 3.9,
                     "file": f"windows/w{i + 1:06d}.jsonl.gz"})
    jsonl(d / "windows.jsonl", wins)
    jsonl(d / "events.jsonl", [{"t": T0, "event": "soak_start"}, *events])
    if health is None:
        health = [{"t": T0 + k * 10, "kernel": {"source": "dmesg", "baseline": k == 0, "new": []},
                   "smart": {"/dev/nvme0n1": {"json": SMART_OK}}, "mdstat": MD_OK} for k in range(4)]
    jsonl(d / "health.jsonl", health)
    answers = [{"request_id": f"probe-{i}", "status": "ok", "text": "same"} for i in range(4)]
    (d / "probe-start.json").write_text(json.dumps({"answers": answers}))
    end = [{**a, "text": probe_end_text, "status": probe_end_status} for a in answers]
    (d / "probe-end.json").write_text(json.dumps({"answers": end}))
    if done:
        (d / "done.json").write_text(json.dumps({"reason": "duration", "elapsed_s": n * window}))
    return d


# fio leaves as the rounds protocol writes them: the median and the steady window's rounds
def _fio_side(level: float) -> dict[str, Any]:
    """Five independent fio runs of one side (retention is decided on runs, not on one run's rounds)."""
    runs = []
    for drift in (1.0, 1.01, 0.99, 1.005, 0.995):
        x = [level * drift * f for f in (1.0, 1.01, 0.99, 1.0, 1.005)]
        runs.append({"value": sorted(x)[2], "text": f"{sorted(x)[2] / 1e9:.2f} GB/s",
                     "samples": {"kind": "percentile", "x": x, "q": 50}})
    return side_leaf(runs)


FIO_BEFORE = _fio_side(2.0e9)
FIO_AFTER = _fio_side(1.9e9)


def verdicts(d: Path, **kw: Any) -> dict[str, str]:
    opts: dict[str, Any] = {"duration_target_s": 60.0, "window_s": 4.0, "nvme": ["/dev/nvme0n1"],
                            "md_arrays": ["md0"], "fio_before": FIO_BEFORE, "fio_after": FIO_AFTER,
                            "concurrency": 4}
    opts.update(kw)
    measured, _ = soak_measured(d, **opts)
    return {c.id: c.verdict.value for c in evaluate_gate(SPEC, measured, overrides=[DURATION])}


PER_INSTANCE = ("ttft_drift_per_instance", "throughput_drift_per_instance")


def test_a_healthy_soak_passes_every_check(tmp_path: Path) -> None:
    v = verdicts(write_soak(tmp_path / "s"))
    # one engine instance: nothing per instance is measured (the gate marks those NOT_APPLICABLE)
    assert {v[c] for c in PER_INSTANCE} == {"NOT_RUN"}
    assert {x for c, x in v.items() if c not in PER_INSTANCE} == {"PASS"}, v


def test_a_kernel_log_that_could_not_be_read_is_not_run(tmp_path: Path) -> None:
    health = [{"t": T0 + k, "kernel": {"error": "dmesg exit 1: Operation not permitted"}} for k in range(4)]
    v = verdicts(write_soak(tmp_path / "s", health=health))
    assert v["storage_errors"] == v["network_errors"] == v["accelerator_errors"] == "NOT_RUN"
    assert v["smart_media_errors"] == "NOT_RUN" and v["raid_healthy"] == "NOT_RUN"


def test_a_baseline_sample_alone_proves_nothing(tmp_path: Path) -> None:
    health = [{"t": T0, "kernel": {"source": "dmesg", "baseline": True, "new": []}}]
    assert verdicts(write_soak(tmp_path / "s", health=health))["storage_errors"] == "NOT_RUN"


def test_new_kernel_fault_lines_fail_by_kind_and_old_ones_do_not_count(tmp_path: Path) -> None:
    faults = (DATA / "kernel_storage_faults_dmesg.txt").read_text().splitlines()
    net = (DATA / "kernel_journalctl_short_iso.txt").read_text().splitlines()
    health = [{"t": T0, "kernel": {"source": "dmesg", "baseline": True, "new": []}},
              {"t": T0 + 10, "kernel": {"source": "dmesg", "baseline": False, "new": BENIGN}},
              {"t": T0 + 20, "kernel": {"source": "dmesg", "baseline": False, "new": [faults[3]]}},
              {"t": T0 + 30, "kernel": {"source": "journalctl", "baseline": False, "new": [net[4]]}}]
    d = write_soak(tmp_path / "s", health=health)
    measured, charts = soak_measured(d, duration_target_s=60.0, window_s=4.0, fio_before=FIO_BEFORE,
                                     fio_after=FIO_AFTER)
    assert measured["soak"]["storage_errors"]["value"] == 1
    assert "QID 1 timeout, aborting" in measured["soak"]["storage_errors"]["detail"]
    assert measured["soak"]["network_errors"]["value"] == 1
    assert measured["soak"]["accelerator_errors"]["value"] == 0
    kinds = [f["kind"] for f in charts["faults"]]
    assert kinds == ["kernel storage", "kernel network"]
    v = {c.id: c.verdict.value for c in evaluate_gate(SPEC, measured, overrides=[DURATION])}
    assert v["storage_errors"] == v["network_errors"] == "FAIL"


def test_smart_media_errors_growing_fail_and_a_drive_never_read_is_not_run(tmp_path: Path) -> None:
    health = [{"t": T0 + k, "kernel": {"source": "dmesg", "baseline": k == 0, "new": []},
               "smart": {"/dev/nvme0n1": {"json": SMART_OK if k < 2 else SMART_BAD}}, "mdstat": MD_OK}
              for k in range(4)]
    assert verdicts(write_soak(tmp_path / "a", health=health))["smart_media_errors"] == "FAIL"
    v = verdicts(write_soak(tmp_path / "b"), nvme=["/dev/nvme0n1", "/dev/nvme1n1"])
    assert v["smart_media_errors"] == "NOT_RUN"


def test_a_degraded_raid_in_any_sample_fails(tmp_path: Path) -> None:
    health = [{"t": T0 + k, "kernel": {"source": "dmesg", "baseline": k == 0, "new": []},
               "smart": {"/dev/nvme0n1": {"json": SMART_OK}}, "mdstat": MD_BAD if k == 2 else MD_OK.replace(
                   "md0", "md1 : active raid1 sdx[1] sdy[0]\n      976630464 blocks super 1.2 [2/2] [UU]\n\nmd0", 1)}
              for k in range(4)]
    measured, charts = soak_measured(write_soak(tmp_path / "s", health=health), duration_target_s=60.0,
                                     window_s=4.0, md_arrays=["md1"])
    assert measured["soak"]["raid_degraded"]["value"] == 1
    assert any(f["kind"] == "raid" and "md1" in f["what"] for f in charts["faults"])
    never = [{"t": T0, "kernel": {"error": "x"}}]
    m2, _ = soak_measured(write_soak(tmp_path / "t", health=never), duration_target_s=60.0, window_s=4.0,
                          md_arrays=["md0"])
    assert m2["soak"]["raid_degraded"]["value"] is None


@pytest.mark.parametrize(("text", "status", "expected"), [
    ("different", "ok", "FAIL"),   # the tier rotted: another answer to the same greedy request
    (None, "error", "NOT_RUN"),    # the engine could not answer at the end: not a pass
])
def test_probe_identity(tmp_path: Path, text: str | None, status: str, expected: str) -> None:
    assert verdicts(write_soak(tmp_path / "s", probe_end_text=text, probe_end_status=status))["probe_identity"] \
        == expected


def test_ttft_rising_fails_the_drift_check_and_too_few_windows_are_not_run(tmp_path: Path) -> None:
    v = verdicts(write_soak(tmp_path / "a", ttft=lambda i: 80.0 * (1.3 if i >= 10 else 1.0) + (i % 2)))
    assert v["ttft_drift"] == "FAIL"
    v = verdicts(write_soak(tmp_path / "b", tput=lambda i: 240.0 * (0.7 if i >= 10 else 1.0) + (i % 2)))
    assert v["throughput_drift"] == "FAIL"
    v = verdicts(write_soak(tmp_path / "c", n=1))
    assert v["ttft_drift"] == v["throughput_drift"] == "NOT_RUN"
    # 6 windows: 2 per group, fewer than the 5 an interval needs
    assert verdicts(write_soak(tmp_path / "d", n=6))["ttft_drift"] == "INCONCLUSIVE"


def test_throughput_lost_in_a_fifth_of_the_last_windows_is_not_hidden_by_a_median(tmp_path: Path) -> None:
    """The false PASS of a median of throughputs: in the last third, every fifth window served 256
    tok/s instead of 640 (a tier that stalls now and then) while the others kept their level. The
    throughput of those windows (the tokens they served over their time) fell by 16%; the median of
    the windows' figures, what the drift was decided on before, saw only the good ones: -4.8%
    [-4.8%, -4.8%], PASS. Window throughputs are whole requests (640 or 672 tok/s here, as in the
    demo), so the resampled medians never left those two levels."""
    def tput(i: int) -> float:
        if i < 180:
            return 672.0 if i < 90 or i % 2 == 0 else 640.0
        return 256.0 if i % 5 == 0 else 640.0

    d = write_soak(tmp_path / "s", n=270, tput=tput)
    assert verdicts(d, duration_target_s=1080.0)["throughput_drift"] == "FAIL"
    measured, _ = soak_measured(d, duration_target_s=1080.0, window_s=4.0, concurrency=4)
    leaf = measured["soak"]["throughput_drift"]
    assert leaf["samples"]["stat"] == "mean" and "mean of 5 batch means: first 90 windows 672" in leaf["text"]
    assert 0.15 < leaf["value"] < 0.17


def test_windows_without_a_completed_request_at_the_end_make_ttft_drift_not_run(tmp_path: Path) -> None:
    # the engine died in the last third: its windows have no TTFT; comparing the windows that do
    # would pass on the wrong windows
    v = verdicts(write_soak(tmp_path / "s", ttft=lambda i: None if i >= 12 else 80.0 + (i % 3)))
    assert v["ttft_drift"] == "NOT_RUN"


def test_a_ttft_of_zero_is_no_measurement_and_a_throughput_of_zero_is_a_stall(tmp_path: Path) -> None:
    """The false PASS of a degenerate figure: a last third whose windows report TTFT p50 0 ms (a
    broken clock or record) would be a -100% drift, a PASS against <= 10%; it is NOT_RUN, named. A
    last third that served nothing is a measured 100% loss of throughput: FAIL."""
    d = write_soak(tmp_path / "t", ttft=lambda i: 0.0 if i >= 10 else 80.0 + (i % 3))
    assert verdicts(d)["ttft_drift"] == "NOT_RUN"
    measured, _ = soak_measured(d, duration_target_s=60.0, window_s=4.0, concurrency=4)
    assert "window(s) 11, 12, 13, 14, 15 of the first or last third have a figure of 0 or less" in \
        measured["soak"]["ttft_p50_drift"]["detail"]
    v = verdicts(write_soak(tmp_path / "p", tput=lambda i: 0.0 if i >= 10 else 240.0 - (i % 2)))
    assert v["throughput_drift"] == "FAIL"


def test_a_partial_last_window_is_left_out_of_drift(tmp_path: Path) -> None:
    d = write_soak(tmp_path / "s")
    rows = [json.loads(x) for x in (d / "windows.jsonl").read_text().splitlines()]
    rows.append({**rows[-1], "index": 16, "length_s": 0.4, "ttft_p50_ms": 900.0, "throughput_tok_s": 5.0})
    jsonl(d / "windows.jsonl", rows)
    v = verdicts(d)
    assert v["ttft_drift"] == "PASS" and v["throughput_drift"] == "PASS"


def test_restarts_failures_and_a_short_soak(tmp_path: Path) -> None:
    d = write_soak(tmp_path / "s", n=10, failed=30, events=({"t": T0 + 9, "event": "restart", "pid": 42,
                                                           "detail": "engine process gone"},))
    v = verdicts(d)
    assert v["no_restarts"] == v["failed_requests"] == v["duration"] == "FAIL"


def test_nothing_measured_is_never_a_pass(tmp_path: Path) -> None:
    d = tmp_path / "empty"
    d.mkdir()
    v = verdicts(d, fio_before=None, fio_after=None, engine_watched=False)
    assert "PASS" not in v.values(), v
    assert all(x == "NOT_RUN" for x in v.values()), v


def test_an_unwatched_engine_alive_at_the_end_is_not_a_pass(tmp_path: Path) -> None:
    # alive at the end says nothing of a crash and restart in between (tests/pipelines/test_g4_enginewatch.py)
    d = write_soak(tmp_path / "s")
    assert verdicts(d, engine_watched=False)["no_restarts"] == "NOT_RUN"
    assert verdicts(d, engine_watched=False, engine_alive_at_end=False)["no_restarts"] == "FAIL"
    assert verdicts(d, engine_watched=False, engine_alive_at_end=True)["no_restarts"] == "NOT_RUN"


def test_smart_and_raid_apply_only_when_the_inventory_names_drives_or_raid() -> None:
    from harness.config.inventory import Inventory
    from harness.config.loader import load_profile
    from harness.pipelines.gaterun.applicability import not_applicable

    profile = load_profile(ROOT / "profiles" / "demo.yaml")

    def inv(target: dict[str, Any]) -> Inventory:
        return Inventory.model_validate({"cluster": "t", "nodes": [
            {"name": "n", "host": "127.0.0.1", "storage": [{"name": "fast-disk", "path": "/tmp/x", **target}]}]})

    plain = not_applicable("G4", inv({}), profile)
    assert "soak.media_errors_delta" in plain and "soak.raid_degraded" in plain
    array = not_applicable("G4", inv({"device": "/dev/md0", "raid": "raid0",
                                      "raid_members": ["nvme0n1", "nvme1n1"]}), profile)
    assert "soak.media_errors_delta" not in array and "soak.raid_degraded" not in array
    assert "soak.storage_errors" not in plain and "soak.probe_identical" not in plain
    # one instance: its drift is the pooled drift; two: every instance is checked on its own
    assert "soak.instance_drift.*.ttft_p50" in plain
    two = profile.model_copy(update={"model": profile.model.model_copy(update={"instances_per_node": 2})})
    assert "soak.instance_drift.*.ttft_p50" not in not_applicable("G4", inv({}), two)


def _multi_instance_soak(d: Path, *, instances: int, slow: int | None, per_instance: bool = True) -> Path:
    """Windows made by the agent's own accumulator from request records dealt round-robin over
    ``instances``; instance ``slow`` answers 50% slower in the last third."""
    import random

    from harness.load.soakwindow import WindowAccumulator

    write_soak(d, n=30)
    rng = random.Random(4)
    rows = []
    for w in range(30):
        acc = WindowAccumulator(w + 1, T0 + 4.0 * w)
        for r in range(40):
            inst = r % instances
            ttft = 20.0 * rng.uniform(0.95, 1.05) * (1.5 if inst == slow and w >= 20 else 1.0)
            rec = {"status": "ok", "ttft_ms": ttft, "tpot_ms": 5.0, "input_tokens": 100, "output_tokens": 8}
            acc.add({**rec, "instance": inst} if per_instance else rec)
        rows.append({**acc.summary(T0 + 4.0 * (w + 1)), "file": f"windows/w{w + 1:06d}.jsonl.gz"})
    jsonl(d / "windows.jsonl", rows)
    return d


def test_one_slow_instance_among_four_fails_its_own_drift_where_the_pooled_drift_passes(tmp_path: Path) -> None:
    """The false PASS of pooled windows: requests go round-robin to 4 instances and one of them
    becomes 50% slower; the pooled windows' median TTFT barely moves (a quarter of the values),
    so ``ttft_drift`` alone PASSes. Each instance's own drift FAILs for the slow one."""
    d = _multi_instance_soak(tmp_path / "s", instances=4, slow=3)
    measured, _ = soak_measured(d, duration_target_s=60.0, window_s=4.0, nvme=["/dev/nvme0n1"], md_arrays=["md0"],
                                fio_before=FIO_BEFORE, fio_after=FIO_AFTER, instances=4)
    checks = {c.id: c for c in evaluate_gate(SPEC, measured, overrides=[DURATION])}
    assert checks["ttft_drift"].verdict.value == "PASS"  # what pooling alone would have signed
    per = checks["ttft_drift_per_instance"]
    assert per.verdict.value == "FAIL"
    bad = [o for o in per.observations if o.verdict.value == "FAIL"]
    assert [o.path for o in bad] == ["soak.instance_drift.instance 3.ttft_p50"]
    assert {o.verdict.value for o in per.observations if o not in bad} == {"PASS"}
    assert len(per.observations) == 4
    # the same soak without the slow instance passes per instance
    d = _multi_instance_soak(tmp_path / "ok", instances=4, slow=None)
    measured, _ = soak_measured(d, duration_target_s=60.0, window_s=4.0, nvme=["/dev/nvme0n1"], md_arrays=["md0"],
                                fio_before=FIO_BEFORE, fio_after=FIO_AFTER, instances=4)
    checks = {c.id: c for c in evaluate_gate(SPEC, measured, overrides=[DURATION])}
    assert checks["ttft_drift_per_instance"].verdict.value == "PASS"
    assert checks["throughput_drift_per_instance"].verdict.value == "PASS"


def test_instances_the_windows_do_not_list_are_not_run(tmp_path: Path) -> None:
    # windows without per-instance figures (records without ``instance``), and a profile of 3
    # instances where the windows list 2: the missing ones are NOT_RUN, never left out
    for name, kw, n in (("flat", {"instances": 2, "per_instance": False}, 2), ("two", {"instances": 2}, 3)):
        d = _multi_instance_soak(tmp_path / name, slow=None, **kw)  # type: ignore[arg-type]
        measured, _ = soak_measured(d, duration_target_s=60.0, window_s=4.0, fio_before=FIO_BEFORE,
                                    fio_after=FIO_AFTER, instances=n)
        checks = {c.id: c for c in evaluate_gate(SPEC, measured, overrides=[DURATION])}
        per = checks["ttft_drift_per_instance"]
        assert per.verdict.value == "NOT_RUN", (name, per)
        assert len(per.observations) == n
        missing = [o for o in per.observations if o.verdict.value == "NOT_RUN"]
        assert missing and all("carry no figures of this instance" in (o.reason or "") for o in missing)


def test_a_declared_warm_up_is_left_out_of_drift_so_a_slow_start_cannot_hide_a_slowdown(tmp_path: Path) -> None:
    # 5 slow warm-up windows (the tier filling up), then steady, then 25% slower from window 17 on.
    # Counting the warm-up, the first third is mostly the slow start: the slowdown looks like a
    # speed-up and does not FAIL. With the warm-up declared (20 s = 5 windows of 4 s) it FAILs.
    def ttft(i: int) -> float:
        return 200.0 if i < 5 else (100.0 if i >= 16 else 80.0) + (i % 2)

    def tput(i: int) -> float:
        return 100.0 if i < 5 else (170.0 if i >= 16 else 240.0) - (i % 2)

    d = write_soak(tmp_path / "s", n=24, ttft=ttft, tput=tput)
    assert verdicts(d)["ttft_drift"] != "FAIL"  # the wrong answer a warm-up in the windows gives
    v = verdicts(d, warmup_s=20.0)
    assert v["ttft_drift"] == "FAIL" and v["throughput_drift"] == "FAIL", v
    measured, charts = soak_measured(d, duration_target_s=96.0, window_s=4.0, warmup_s=20.0)
    assert "after the 20 s warm-up (5 window(s) left out)" in measured["soak"]["ttft_p50_drift"]["detail"]
    assert charts["drift_windows"] == list(range(6, 25)) and charts["warmup_s"] == 20.0
    assert measured["soak"]["duration"]["value"] == 96.0  # the warm-up is time under load


def test_a_failure_in_the_warm_up_still_counts_and_a_warm_up_leaving_too_few_windows_is_not_a_pass(
        tmp_path: Path) -> None:
    d = write_soak(tmp_path / "s", n=15, failed=30)
    rows = [json.loads(x) for x in (d / "windows.jsonl").read_text().splitlines()]
    for r in rows:  # move the failures into the first window (inside the warm-up)
        r["failed"], r["failures"] = (30, {"connect": 30}) if r["index"] == 1 else (0, {})
    jsonl(d / "windows.jsonl", rows)
    assert verdicts(d, warmup_s=12.0)["failed_requests"] == "FAIL"
    v = verdicts(write_soak(tmp_path / "t"), warmup_s=56.0)  # one window left after it
    assert v["ttft_drift"] == v["throughput_drift"] == "NOT_RUN"


def test_the_profile_refuses_a_warm_up_as_long_as_the_soak() -> None:
    from pydantic import ValidationError

    from harness.config.profile import SoakSpec

    assert SoakSpec.model_validate({"duration": "60s", "window": "2s", "warmup": "6s"}).warmup == 6.0
    with pytest.raises(ValidationError, match="warmup"):
        SoakSpec.model_validate({"duration": "60s", "window": "2s", "warmup": "60s"})


def _wandering_windows(seed: int, slower: float, windows: int = 168) -> list[dict[str, Any]]:
    """Windows whose log TTFT wanders as the demo soaks' did on this project's VM (a slow and a fast
    AR(1): 34% of the variance at lag-1 0.864, the rest at 0.206, sd 0.13; bench/coverage.py's
    "fitted" model), the last third ``slower`` (0.15: 15% slower)."""
    import math
    import random

    rng = random.Random(seed)
    parts = [(0.335, 0.864), (0.665, 0.206)]
    level = [rng.gauss(0.0, 0.13 * math.sqrt(w)) for w, _ in parts]
    out = []
    for i in range(windows):
        if i:
            level = [phi * x + rng.gauss(0.0, 0.13 * math.sqrt(w * (1.0 - phi * phi)))
                     for x, (w, phi) in zip(level, parts)]
        slow = 1.0 + slower if i >= windows - windows // 3 else 1.0
        out.append({"index": i + 1, "ttft_p50_ms": 12.5 * slow * math.exp(sum(level))})
    return out


def test_a_steady_wandering_soak_is_decided_on_batches_of_windows_not_on_blocks_fitted_to_lag_one() -> None:
    """The false FAIL and false PASS of an interval too narrow for the wander: a demo soak's TTFT on
    this project's VM wanders with a memory of tens of windows (autocorrelation 0.2-0.3 out to lag
    12), which the moving blocks' length (Carlstein's rule on the lag-1 autocorrelation: an AR(1))
    does not see. Its interval missed a steady soak's true drift of 0 in a fifth to a quarter of such soaks
    (a nominal 95% misses 5%): false FAILs against 10% in soaks that wandered up, false PASSes in
    ones that drifted. The drift is now decided on batch means: each third cut into 5 batches of
    consecutive windows, a Welch t interval of the log ratio of their mean figures (about 10%
    missed; bench/coverage.py has the figures with their Monte Carlo errors, false FAIL at +8% and
    false PASS at +15% included)."""
    from harness.gates import stats
    from harness.pipelines.g4.soakdata import drift_leaf

    trials, missed = 200, {"batches": 0, "blocks": 0}
    for seed in range(trials):
        samples = dict(drift_leaf(_wandering_windows(seed, 0.0), "ttft_p50_ms", "gain", "TTFT p50")["samples"])
        assert samples["batches"] == 5 and "block" not in samples
        old = {k: v for k, v in samples.items() if k not in ("batches", "long_memory")}
        old["block"] = stats.block_length([old["a"], old["b"]], len(old["a"]))
        for name, spec in (("batches", samples), ("blocks", old)):
            low, high = stats.bootstrap_interval(stats.parse_sample_spec(spec), confidence=0.95, resamples=300,
                                                 rng=random.Random(seed))
            missed[name] += not low <= 0.0 <= high
    assert missed["batches"] <= 0.15 * trials, missed  # 21 at these seeds
    assert missed["blocks"] >= 1.5 * missed["batches"], missed  # 54 at these seeds


def test_a_wandering_soak_that_drifted_past_the_threshold_does_not_pass() -> None:
    """A 15% slowdown of the last third under the same wander: the gate's interval ends below 10%
    (PASS) in at most a one-sided 2.5% of soaks (about 1% in bench/coverage.py)."""
    from harness.gates import stats
    from harness.pipelines.g4.soakdata import drift_leaf

    trials, passed = 400, 0
    for seed in range(trials):
        leaf = drift_leaf(_wandering_windows(10_000 + seed, 0.15), "ttft_p50_ms", "gain", "TTFT p50")
        _, high = stats.bootstrap_interval(stats.parse_sample_spec(leaf["samples"]), confidence=0.95,
                                           resamples=1, rng=random.Random(seed))
        passed += high <= 0.10
    assert passed <= 0.025 * trials, passed  # 3 at these seeds


def test_a_stalled_window_does_not_count_as_hours_under_load(tmp_path: Path) -> None:
    """The false PASS of wall time: the agent was frozen (or the node's clock stepped) for 40 s
    inside window 3 of a 15-window soak of 4 s windows that stopped at 36 s of load. From the first
    start to the last end that is 76 s >= 60 s; under load it was 36 s + a capped window."""
    d = write_soak(tmp_path / "s", n=9)
    rows = [json.loads(x) for x in (d / "windows.jsonl").read_text().splitlines()]
    rows[2]["length_s"] = 44.0
    rows[2]["ended_unix"] = rows[2]["started_unix"] + 44.0
    for r in rows[3:]:
        r["started_unix"] += 40.0
        r["ended_unix"] += 40.0
    jsonl(d / "windows.jsonl", rows)
    measured, _ = soak_measured(d, duration_target_s=60.0, window_s=4.0)
    dur = measured["soak"]["duration"]
    assert dur["value"] == 8 * 4.0 + 5.0
    assert "window 3 (44 s)" in dur["detail"] and "wall time 76 s" in dur["detail"]
    assert verdicts(d)["duration"] == "FAIL"


def test_a_soak_far_below_its_level_fails_load_held_and_an_unknown_level_is_not_run(tmp_path: Path) -> None:
    """The false PASS of a soak that barely ran: 15 clean windows with no failure, no drift and no
    error, but one request in flight of the profile's 4 (a throttled client, stuck workers). Every
    other check PASSes; ``load_held`` does not."""
    d = write_soak(tmp_path / "low", in_flight=lambda i: 1.0)
    v = verdicts(d)
    assert v["load_held"] == "FAIL"
    assert {v[c] for c in ("failed_requests", "ttft_drift", "throughput_drift", "no_restarts")} == {"PASS"}
    measured, _ = soak_measured(d, duration_target_s=60.0, window_s=4.0, concurrency=4)
    assert measured["soak"]["load_level"]["text"] == "25.0% (1 of 4 requests in flight)"
    # a dip in a few windows of an otherwise full soak is averaged, the lowest window named
    d = write_soak(tmp_path / "dip", in_flight=lambda i: 2.0 if i == 7 else 3.95)
    measured, _ = soak_measured(d, duration_target_s=60.0, window_s=4.0, concurrency=4)
    assert verdicts(d)["load_held"] == "PASS"
    assert "lowest window 2 in flight" in measured["soak"]["load_level"]["detail"]
    # open loop: requests sent per second against the profile's rate (60 per 4 s window = 15/s)
    measured, _ = soak_measured(d, duration_target_s=60.0, window_s=4.0, request_rate=20.0)
    assert measured["soak"]["load_level"]["value"] == 0.75
    # nothing to compare with, or windows without the figure: NOT_RUN
    assert soak_measured(d, duration_target_s=60.0, window_s=4.0)[0]["soak"]["load_level"]["value"] is None
    rows = [json.loads(x) for x in (d / "windows.jsonl").read_text().splitlines()]
    jsonl(d / "windows.jsonl", [{k: x for k, x in r.items() if k != "mean_in_flight"} for r in rows])
    assert verdicts(d)["load_held"] == "NOT_RUN"


def _fgn_windows(seed: int, hurst: float, windows: int, drift: float) -> list[dict[str, float]]:
    """Windows whose log TTFT is fractional Gaussian noise (sd 0.13; Davies-Harte), the last third
    ``drift`` slower."""
    import numpy as np

    k = np.arange(windows + 1, dtype=float)
    gamma = 0.5 * (np.abs(k + 1) ** (2 * hurst) - 2 * k ** (2 * hurst) + np.abs(k - 1) ** (2 * hurst))
    eig = np.sqrt(np.maximum(np.fft.fft(np.concatenate([gamma, gamma[-2:0:-1]])).real, 0.0) / (2 * windows))
    rng = np.random.default_rng(seed)
    z = rng.normal(size=2 * windows) + 1j * rng.normal(size=2 * windows)
    logs = 0.13 * np.fft.fft(eig * z).real[:windows]
    return [{"index": i + 1, "ttft_p50_ms": 15.0 * math.exp(v) * (1 + drift if i >= windows - windows // 3 else 1)}
            for i, v in enumerate(logs)]


def test_a_soak_with_long_memory_is_covered_and_a_slowdown_never_passes() -> None:
    """Issue 52 item 4: with fractional Gaussian noise at Hurst 0.9 (storage background work keeps a
    long memory), batch means alone missed a steady soak's true 0 in about a quarter of soaks at any
    length (bench-coverage: 77% coverage at 168 windows, 74% at 4,320). The drift's interval is
    widened for the Hurst exponent its own windows show: 3% missed in bench-coverage."""
    from harness.gates import stats
    from harness.pipelines.g4.soakdata import drift_leaf

    trials, missed, passed = 200, {"gate": 0, "batches": 0}, 0
    for seed in range(trials):
        samples = dict(drift_leaf(_fgn_windows(seed, 0.9, 168, 0.0), "ttft_p50_ms", "gain", "TTFT p50")["samples"])
        assert samples["long_memory"] is True
        plain = {k: v for k, v in samples.items() if k != "long_memory"}
        for name, spec in (("gate", samples), ("batches", plain)):
            low, high = stats.bootstrap_interval(stats.parse_sample_spec(spec), confidence=0.95, resamples=1,
                                                 rng=random.Random(seed))
            missed[name] += not low <= 0.0 <= high
        slow = drift_leaf(_fgn_windows(50_000 + seed, 0.9, 168, 0.15), "ttft_p50_ms", "gain", "TTFT p50")
        _, high = stats.bootstrap_interval(stats.parse_sample_spec(slow["samples"]), confidence=0.95, resamples=1,
                                           rng=random.Random(seed))
        passed += high <= 0.10
    assert missed["gate"] <= 0.07 * trials, missed  # nominal 5%
    assert missed["batches"] >= 2 * missed["gate"], missed
    assert passed <= 0.025 * trials, passed
