"""`kvgate estimate`: the done-when command prints KV sizes, the break-even and the G3 bandwidth;
a campaign's measured figures come back as expected vs measured; bad input exits 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.cli.main import run
from harness.report import render_gate_reports
from harness.store.campaign import load_result

ROOT = Path(__file__).resolve().parents[2]
PROFILE_480B = str(ROOT / "profiles" / "moe-480b-tp8.yaml")


def test_480b_profile_prints_the_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["estimate", "--profile", PROFILE_480B]) == 0
    out = capsys.readouterr().out
    assert "KV per token       253,952 B" in out
    assert "KV per request     15.50 GiB (65,552 tokens)" in out
    assert "Break-even read bandwidth" in out and "H800 4.81 GB/s" in out
    assert "G3 needs" in out and "1.33x the baseline's" in out and "5.00 GB/s" in out
    # no flags: the profile names its accelerator (MI308X); AMD publishes no MI308X peak, so the
    # MI300X datasheet figure stands in as an upper bound, and the output says so
    assert "Accelerator        MI308X x 8, peak 1,307 TFLOPS (a stand-in upper bound" in out
    assert "recomputing them): 6.36 GB/s" in out
    assert "AMD publishes no peak figure for the MI308X" in out and "upper bound" in out
    assert "MI308X" not in out.split("per preset part")[1].split("\n")[0]  # the stand-in is not a datasheet row


def test_480b_stand_in_is_an_upper_bound(capsys: pytest.CaptureFixture[str]) -> None:
    """A lower (real) peak makes recompute slower, so the break-even can only fall below the
    stand-in's figure; a figure the user gives replaces the stand-in and its note."""
    assert run(["estimate", "--profile", PROFILE_480B, "--json"]) == 0
    stand_in = json.loads(capsys.readouterr().out)
    assert stand_in["accelerator"]["peak_stand_in"] is True
    assert stand_in["break_even_bw"] == pytest.approx(6.36e9, rel=0.01)
    assert run(["estimate", "--profile", PROFILE_480B, "--peak-tflops", "900", "--json"]) == 0
    given = json.loads(capsys.readouterr().out)
    assert given["accelerator"]["peak_stand_in"] is False
    assert given["break_even_bw"] < stand_in["break_even_bw"]
    assert not any("stand" in n or "publishes no peak" in n for n in given["notes"])


def test_480b_with_a_peak_and_bandwidths(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["estimate", "--profile", PROFILE_480B, "--inventory",
                str(ROOT / "inventory" / "mi308x-8gpu.example.yaml"), "--peak-tflops", "300",
                "--read-bw", "baseline=3GB/s", "--read-bw", "candidate=5.23GB/s", "--json"])
    assert code == 0
    d = json.loads(capsys.readouterr().out)
    assert d["accelerator"]["name"] == "MI308X"
    assert d["capacity"]["hbm"]["requests_fit"] == 25
    assert d["break_even_bw"] == pytest.approx(1.46e9, rel=0.01)
    assert set(d["g3"]["needed_bw"]) == {"8", "16", "32"}
    assert all(v is not None and v > 3e9 * 0.9 for v in d["g3"]["needed_bw"].values())
    assert d["compare"]["16"]["ttft_reduction"] > 0.25  # 5.23 vs 3 GB/s clears the 25% on this model


@pytest.mark.parametrize("argv", [
    ["--read-bw", "nosucharm=1GB/s"],
    ["--read-bw", "candidate=fast"],
    ["--efficiency", "1.5"],
    ["--model-config", "/nonexistent/config.json"],
])
def test_bad_input_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["estimate", "--profile", PROFILE_480B, *argv]) == 2
    err = capsys.readouterr().err
    assert "kvgate: error:" in err and "Traceback" not in err


def test_model_config_file_overrides_the_preset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = ROOT / "tests" / "data" / "models" / "deepseek-v3.json"
    assert run(["estimate", "--profile", PROFILE_480B, "--model-config", str(cfg), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["model"]["attention"] == "mla"
    assert d["kv"]["per_token"] == 70_272
    assert d["kv"]["per_rank_per_request"] == d["kv"]["per_request"]  # the latent is replicated
    bad = tmp_path / "config.json"
    bad.write_text('{"num_hidden_layers": "many"}')
    assert run(["estimate", "--profile", PROFILE_480B, "--model-config", str(bad)]) == 2
    assert "num_hidden_layers" in capsys.readouterr().err


def _fake_campaign(tmp_path: Path) -> Path:
    """A G3 result.json as the demo writes it (measurements only matter here)."""
    from harness.store.schema import GateResult

    camp = tmp_path / "c1"
    (camp / "G3").mkdir(parents=True)
    result = GateResult(
        gate="G3", title="t", campaign="c1", verdict="PASS", exit_code=0, started_at="x", finished_at="y",
        kvgate_version="0", measurements={
            "fio": {"local": {"fast-disk": {"seq_read_bw": 1.0e9}}},
            "sweep": {"baseline": {"2": {"ttft_p50_ms": 212.7, "output_throughput": 125.0}},
                      "candidate": {"2": {"ttft_p50_ms": 90.0, "output_throughput": 300.0}}},
        })
    (camp / "G3" / "result.json").write_text(result.model_dump_json())
    return camp


def test_campaign_gives_expected_vs_measured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    camp = _fake_campaign(tmp_path)
    assert run(["estimate", "--profile", str(ROOT / "profiles" / "demo.yaml"), "--campaign", str(camp),
                "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["arms"]["candidate"]["read_bw"] == 1.0e9
    rows = {r["arm"]: r for r in d["expected_vs_measured"]["rows"]}
    # the demo's baseline is its recompute arm: compute is calibrated from it (212.7 ms at c2 instead
    # of the configured 20,000 tok/s), so that arm agrees by construction and the notes say so
    assert rows["baseline"]["factor"] == pytest.approx(1.0, rel=1e-6)
    assert d["compute"]["tokens_per_s"] == pytest.approx(4112 / 0.2127, rel=1e-4)
    assert any("calibrated from the recompute arm 'baseline'" in n for n in d["notes"])
    assert rows["candidate"]["factor"] > 2 and "slower" in rows["candidate"]["cause"]
    assert run(["estimate", "--profile", str(ROOT / "profiles" / "demo.yaml"), "--campaign", str(camp)]) == 0
    assert "Expected vs measured" in capsys.readouterr().out


def test_report_renders_the_expected_section(tmp_path: Path) -> None:
    from harness.config.loader import load_inventory, load_profile
    from harness.estimate.gatehook import expected_block

    camp = _fake_campaign(tmp_path)
    result = load_result(camp / "G3" / "result.json")
    _, block = expected_block(load_profile(ROOT / "profiles" / "demo.yaml"),
                              load_inventory(ROOT / "inventory" / "localhost.yaml"), {"candidate": 1.0e9},
                              result.measurements["sweep"])
    result.measurements["expected"] = block
    (camp / "G3" / "result.json").write_text(result.model_dump_json())
    render_gate_reports(camp / "G3")
    html = (camp / "G3" / "report.html").read_text()
    md = (camp / "G3" / "report.md").read_text()
    for text in (html, md):
        assert "Expected vs measured" in text and "Measured TTFT p50 (s)" in text
        assert "0.213" in text and "0.206" in text  # baseline measured and predicted
    assert "Measurements: expected" not in html
    shutil.rmtree(camp)


def _bandwidth_campaign(tmp_path: Path, estimator: Any) -> Path:
    """A campaign whose one gate directory holds a bandwidth curve (the sweep's result.json)."""
    from harness.store.campaign import result_bytes
    from tests.report.budget import demo_result
    from tests.support.bandwidthcurve import synthetic_curve

    result = demo_result()
    curve = synthetic_curve(0.6)
    curve["estimator"] = estimator(curve) if callable(estimator) else estimator
    result.measurements["bandwidth_curve"] = curve
    (tmp_path / "bw-camp" / "BW").mkdir(parents=True)
    (tmp_path / "bw-camp" / "BW" / "result.json").write_bytes(result_bytes(result))
    return tmp_path / "bw-camp"


def test_calibration_applies_the_campaigns_read_efficiency(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cluster not measured yet (the demo profile on a 1 GB/s tier) with the efficiency the
    campaign's curve calibrated: the engine gets 0.6 x 1 GB/s, and G3's need is said in fio terms."""
    from harness.estimate import calibrate_curve
    from tests.support.bandwidthcurve import demo_profile

    camp = _bandwidth_campaign(tmp_path, lambda c: calibrate_curve(demo_profile(), None, c))
    demo = str(ROOT / "profiles" / "demo.yaml")
    base = ["estimate", "--profile", demo, "--read-bw", "candidate=1GB/s", "--json"]
    assert run(base) == 0
    plain = json.loads(capsys.readouterr().out)
    assert run([*base, "--calibration", str(camp)]) == 0
    cal = json.loads(capsys.readouterr().out)
    value = cal["calibration"]["value"]
    assert value == pytest.approx(0.6, rel=0.03)
    assert cal["arms"]["candidate"]["read_bw"] == pytest.approx(1e9 * value)
    assert "read_efficiency" in cal["arms"]["candidate"]["read_bw_source"]
    assert cal["arms"]["candidate"]["points"]["2"]["ttft_s"] > plain["arms"]["candidate"]["points"]["2"]["ttft_s"]
    assert cal["calibration"]["source"] == str(camp / "BW" / "result.json")
    assert run(["estimate", "--profile", demo, "--read-bw", "candidate=1GB/s", "--calibration", str(camp)]) == 0
    out = capsys.readouterr().out
    assert f"Calibrated         read_efficiency {value:.3f} from {camp / 'BW' / 'result.json'}" in out
    assert "G3 needs (tier)    fio read bandwidth of the candidate's tier, calibrated: c2 " in out


@pytest.mark.parametrize("case,message", [
    ("no curve", "has measurements.bandwidth_curve"),
    ("no estimator", "bandwidth_curve.estimator is missing"),
    ("uncalibrated", "cannot be calibrated: no point to fit on"),
    ("another engine", "was measured with engine 'sim'; this profile's engine is 'vllm'"),
])
def test_calibration_without_a_usable_curve_exits_2_naming_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, message: str) -> None:
    from harness.estimate import calibrate_curve
    from harness.estimate.calibration import _uncalibrated
    from tests.support.bandwidthcurve import demo_profile

    if case == "no curve":
        camp = tmp_path / "empty-camp"
        (camp / "G3").mkdir(parents=True)
        shutil.copy(ROOT / "tests" / "data" / "report" / "demo-G3.result.json", camp / "G3" / "result.json")
        where = str(camp)
    else:
        camp = _bandwidth_campaign(tmp_path, None if case == "no estimator" else _uncalibrated(
            "no point to fit on (every point errored)") if case == "uncalibrated" else
            lambda c: calibrate_curve(demo_profile(), None, c))
        where = str(camp / "BW" / "result.json")
    profile = PROFILE_480B if case == "another engine" else str(ROOT / "profiles" / "demo.yaml")
    code = run(["estimate", "--profile", profile, "--calibration", str(camp)])
    err = capsys.readouterr().err
    assert code == 2 and message in err and where in err and "Traceback" not in err
