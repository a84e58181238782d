"""#29 item 7: ``kvgate verify`` and ``kvgate soak status`` print node- or file-supplied strings
clean: no escape sequence (screen clear, colours, OSC), no control character, and no line break
that would let a string print a fake "VERIFIED" line of its own."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.cli import cmd_soak
from harness.cli.table import json_safe, terminal_safe
from tests.store.test_history_import_export import _gate_result, _write
from tests.support.procs import HANG_GUARD_S

EVIL = "x\x1b[2J\x1b]0;pwned\x07\r\nVERIFIED: everything\x9b31m\x00\u202eSSAP"
RAW = ("\x1b", "\x9b", "\r", "\x00", "\x07", "\u202e")


def test_terminal_safe_strips_every_control() -> None:
    out = terminal_safe(EVIL)  # shown escaped (#50 item 3), where #29 dropped or replaced them
    assert out == "x\\x1b[2J\\x1b]0;pwned\\x07\\x0d\\x0aVERIFIED: everything\\x9b31m\\x00\\u202eSSAP"
    assert json.loads(json_safe(json.dumps({"a": "\u202e"}, ensure_ascii=False))) == {"a": "\u202e"}
    assert "\u202e" not in json_safe(json.dumps({"a": "\u202e"}, ensure_ascii=False))
    assert json.loads(json_safe(json.dumps({"a": "\x9b1m"}, ensure_ascii=False))) == {"a": "\x9b1m"}
    assert "\x9b" not in json_safe(json.dumps({"a": "\x9b1m"}, ensure_ascii=False))


def test_verify_prints_a_hostile_file_name_clean(tmp_path: Path) -> None:
    gate = _write(tmp_path / "reports", "c1", "G3", _gate_result("c1", "G3", "2026-01-01T01:00:00Z", 0.3))
    (gate / "MANIFEST.sha256").write_text("0" * 64 + "  evil" + EVIL.replace("\x00", "").replace("\n", "") + "\n")
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "verify", str(gate)],  # noqa: S603
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode not in (0, 5), proc.stderr
    assert not [c for c in RAW if c in proc.stdout + proc.stderr]
    assert not [line for line in proc.stdout.splitlines() if line.startswith("VERIFIED")]


def test_soak_status_prints_node_strings_clean(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    st: dict[str, Any] = {
        "campaign": "c1", "node": "n1" + EVIL, "ended": None, "running": True, "eta_unix": 0, "elapsed_s": 1,
        "duration_s": 2, "remaining_s": 1, "windows": 1, "warmup_s": 0,
        "last_windows": [{"index": EVIL, "ok": 1, "failed": 0}], "failing": [{"id": EVIL, "measured": EVIL}],
        "faults": [{"t_s": 1.0, "kind": EVIL, "what": EVIL}], "notes": [EVIL]}
    monkeypatch.setattr(cmd_soak, "status", lambda *a, **k: st)
    args = argparse.Namespace(action="status", campaign="c1", reports=None, inventory=None, gates=None,
                              no_pull=True, json=False)
    assert cmd_soak.run(args) == 0
    out = capsys.readouterr().out
    assert not [c for c in RAW if c in out]
    assert not [line for line in out.splitlines() if line.startswith("VERIFIED")]


def test_every_table_cell_is_printed_inert() -> None:
    from harness.cli.table import render_table

    out = render_table(["node", "tool"], [["n1", "fio-3.36\x1b]52;c;cGF3bmVk\x07"], ["n2\u202e", None]])
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert out.splitlines()[2].startswith("n1") and out.splitlines()[3].rstrip().endswith("-")
