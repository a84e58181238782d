"""`kvgate facts` and `kvgate ping` print what a node said inert (issue 50's hardening, its last
two commands): a node's error text, OS name or tool output holding escape sequences (clear the
screen, set the window title, colour a line) or bidi overrides reaches the terminal escaped
(``harness.terminaltext``). The node is this machine (``connection: local``) with hostile tools
first on its PATH: real processes printing real bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli.main import run

HOSTILE = "\x1b]0;owned\x07\x1b[2J\x1b[32mall nodes PASS\x1b[0m\u202eLIAF\nkvgate: forged line"
SHOWN = "\\x1b]0;owned\\x07\\x1b[2J\\x1b[32mall nodes PASS\\x1b[0m\\u202eLIAF\\x0akvgate: forged line"


def _hostile_tool(bin_dir: Path, name: str) -> None:
    """``name`` on the node: prints HOSTILE on stderr and fails (a node's error text)."""
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "hostile.txt").write_text(HOSTILE)
    tool = bin_dir / name
    tool.write_text(f"#!/bin/sh\ncat '{bin_dir / 'hostile.txt'}' >&2\nexit 1\n")
    tool.chmod(0o755)


def _inventory(tmp_path: Path) -> Path:
    tier = tmp_path / "tier"
    tier.mkdir(parents=True)
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"cluster: t\nnodes:\n  - name: here\n    host: localhost\n    connection: local\n"
                   f"    storage: [{{name: tier, path: {tier}}}]\n")
    return inv


def _assert_inert(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, repr(text)
    assert "\nkvgate: forged line" not in text


def test_facts_prints_a_nodes_error_text_inert(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _hostile_tool(tmp_path / "bin", "lscpu")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{Path('/usr/bin')}:{Path('/bin')}")
    run(["facts", "--inventory", str(_inventory(tmp_path))])
    out, err = capsys.readouterr()
    _assert_inert(out + err)
    assert f"  lscpu: exit code 1: {SHOWN}" in err, err  # the text as received, escaped, on one line


def test_ping_prints_what_a_node_says_inert(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "hostile.txt").write_text(HOSTILE)
    fio = bin_dir / "fio"  # the node's fio answers --version with the hostile text (exit 0)
    fio.write_text(f"#!/bin/sh\ncat '{bin_dir / 'hostile.txt'}'\n")
    fio.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path('/usr/bin')}:{Path('/bin')}")
    assert run(["ping", "--inventory", str(_inventory(tmp_path))]) == 0
    out, err = capsys.readouterr()
    _assert_inert(out + err)
    first_line = SHOWN.split("\\x0a")[0]  # ping reads one line a fact
    assert first_line in out, out
    # and a node that fails: its error shown inert too (the clock probe's date fails)
    _hostile_tool(bin_dir, "date")
    assert run(["ping", "--inventory", str(_inventory(tmp_path / "again"))]) == 4
    out, err = capsys.readouterr()
    _assert_inert(out + err)
    assert "1 of 1 node(s) unreachable" in err and "here: CommandFailed" in err, err
