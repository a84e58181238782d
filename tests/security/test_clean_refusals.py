"""#29 item 8: clean refusals (exit 2 or a finding), never a crash (exit 5), for each case the red
team found: a non-PDF ``report.pdf`` in verify, ``kvgate init`` over a dangling symlink, and trace
timestamps that are ``NaN``, ``Infinity`` or ``1e300`` (which made the replay wait forever); a
trace is validated (finite, ordered, bounded timestamps) before the run starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.load.errors import LoadInputError
from harness.load.hashtrace import parse_trace
from harness.load.jsonl import MAX_TRACE_SECONDS
from harness.load.workloads import _trace
from tests.store.test_history_import_export import _gate_result, _write
from tests.support.procs import HANG_GUARD_S


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli.main", *args],  # noqa: S603
                          capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=cwd)


def test_verify_with_a_non_pdf_report_pdf_is_a_finding(tmp_path: Path) -> None:
    gate = _write(tmp_path / "reports", "c1", "G3", _gate_result("c1", "G3", "2026-01-01T01:00:00Z", 0.3))
    (gate / "report.pdf").write_bytes(b"<html>not a pdf</html>\n")
    proc = _cli("verify", str(gate), cwd=tmp_path)
    assert proc.returncode not in (0, 5), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "cannot be checked as a signed PDF" in proc.stdout


def test_init_over_a_dangling_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "clusters" / "lab").mkdir(parents=True)
    (tmp_path / "clusters" / "lab" / "inventory.yaml").symlink_to(tmp_path / "nowhere")
    proc = _cli("init", "--platform", "cuda", "--name", "lab", "10.0.0.1", cwd=tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("ts", ["NaN", "Infinity", "-Infinity", "1e300", str(MAX_TRACE_SECONDS * 1000 + 1000)])
def test_hash_trace_timestamps_are_finite_and_bounded(tmp_path: Path, ts: str) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text('{"timestamp": 0, "input_length": 16, "output_length": 1, "hash_ids": [1]}\n'
                 f'{{"timestamp": {ts}, "input_length": 16, "output_length": 1, "hash_ids": [2]}}\n')
    with pytest.raises(LoadInputError, match=r"t\.jsonl:2: field 'timestamp'"):
        parse_trace(f, block_size=16)


@pytest.mark.parametrize("ts", ["NaN", "Infinity", "1e300"])
def test_request_trace_timestamps_are_finite_and_bounded(tmp_path: Path, ts: str) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(f'{{"prompt": "hi", "output_len": 1, "timestamp": {ts}}}\n')
    with pytest.raises(LoadInputError, match=r"t\.jsonl:1: field 'timestamp'"):
        _trace({"path": str(f)}, 0)


def test_a_fifo_trace_is_refused_not_waited_on(tmp_path: Path) -> None:
    import os

    f = tmp_path / "t.jsonl"
    os.mkfifo(f)
    with pytest.raises(LoadInputError, match="not a regular file"):
        parse_trace(f, block_size=16)
