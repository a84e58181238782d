"""``kvgate load`` and the agent's ``load`` entry point, run as a user would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli.main import run as kvgate
from harness.load.cli import main as load_main
from tests.load.sse_server import ScriptedServer, chat_stream

DATA = Path(__file__).resolve().parent.parent / "data" / "load"


def test_kvgate_load_run_writes_records_and_summary(server: ScriptedServer, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    server.script = lambda r: chat_stream(["fine ", "thanks "])
    out = tmp_path / "run"
    rc = kvgate(["load", "run", "--endpoint", server.url, "--model", "m", "--workload", "random",
                 "--input-len", "8", "--output-len", "2", "--concurrency", "2", "--num-requests", "5",
                 "--api", "chat", "--seed", "3", "--out", str(out), "--goodput", "ttft:1000", "-q"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "Successful requests:" in text and "Mean TTFT (ms):" in text
    s = json.loads((out / "summary.json").read_text())
    assert s["completed"] == 5 and s["backend"] == "openai-chat" and s["request_goodput"] > 0
    assert len((out / "records.jsonl").read_text().splitlines()) == 5
    assert load_main(["summarize", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["completed"] == 5
    assert load_main(["summarize", str(out), "--recompute"]) == 0
    assert "Successful requests:                       5" in capsys.readouterr().out


def test_summarize_a_vllm_result(capsys: pytest.CaptureFixture[str]) -> None:
    assert kvgate(["load", "summarize", str(DATA / "vllm_result_detailed.json")]) == 0
    out = capsys.readouterr().out
    assert "(vllm)" in out and "4 per-request records" in out and "P99 TTFT (ms):" in out


def test_user_errors_exit_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = kvgate(["load", "run", "--endpoint", "http://127.0.0.1:1", "--model", "m", "--workload", "long-doc",
                 "--out", str(tmp_path)])
    assert rc == 2 and "'num_docs' is required" in capsys.readouterr().err
    rc = load_main(["run", "--endpoint", "ftp://x", "--model", "m", "--input-len", "1", "--output-len", "1",
                    "--num-requests", "1", "--out", str(tmp_path)])
    assert rc == 2 and "expected http://" in capsys.readouterr().err
    assert load_main(["summarize", str(tmp_path / "missing")]) == 2
    assert load_main(["run", "--bogus"]) == 2
    assert load_main(["--help"]) == 0


def test_every_request_failing_is_an_infra_fault(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = load_main(["run", "--endpoint", "http://127.0.0.1:1", "--model", "m", "--input-len", "1",
                    "--output-len", "1", "--num-requests", "2", "--out", str(tmp_path), "-q"])
    assert rc == 4
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["failed"] == 2 and s["errors_by_kind"] == {"connect_failed": 2}
    assert "connect_failed" in capsys.readouterr().out


def test_progress_line_shows_counts_throughput_and_ttft(server: ScriptedServer, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert load_main(["run", "--endpoint", server.url, "--model", "m", "--input-len", "4", "--output-len", "2",
                      "--num-requests", "5", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "[load] 5/5" in err and "ok 5 failed 0" in err and "req/s" in err and "TTFT p50" in err
