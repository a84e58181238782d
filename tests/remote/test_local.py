"""LocalExecutor specifics (the shared contract is in test_contract.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from harness.errors import InputError
from harness.remote.base import CommandFailed, CommandTimeout
from harness.remote.commands import check_argv, check_env
from harness.remote.local import LocalExecutor


def test_env_is_added_to_the_inherited_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KV_INHERITED", "yes")
    r = LocalExecutor().run(["sh", "-c", 'echo "$KV_INHERITED $KV_ADDED"'], env={"KV_ADDED": "too"})
    assert r.stdout == "yes too\n"


def test_default_timeout_applies() -> None:
    ex = LocalExecutor("n", default_timeout=0.5)
    start = time.monotonic()
    with pytest.raises(CommandTimeout):
        ex.run(["sleep", "10"])
    assert time.monotonic() - start < 5


def test_missing_cwd_and_program_are_failures_not_crashes(tmp_path: Path) -> None:
    ex = LocalExecutor()
    with pytest.raises(CommandFailed) as ei:
        ex.run(["true"], cwd=str(tmp_path / "nope"))
    assert ei.value.exit_code == 2 and "nope" in str(ei.value)
    with pytest.raises(CommandFailed) as ei:
        ex.run(["kvgate-missing-xyz", "a"])
    assert ei.value.exit_code == 127 and "command not found" in str(ei.value)
    not_exec = tmp_path / "script"
    not_exec.write_text("#!/bin/sh\n")
    assert ex.run([str(not_exec)], check=False).exit_code == 126


def test_callback_error_is_raised_after_the_command() -> None:
    def boom(stream: str, line: str) -> None:
        raise ValueError("callback failed")

    with pytest.raises(ValueError, match="callback failed"):
        LocalExecutor().run(["echo", "x"], on_line=boom)


def test_argument_checks() -> None:
    assert check_argv(["a", "b"]) == ("a", "b")
    for bad in (["a", 1], ["a\0b"], [], "ls", b"ls"):
        with pytest.raises(InputError):
            check_argv(bad)  # type: ignore[arg-type]
    assert check_env({"A_1": "x y"}) == {"A_1": "x y"}
    with pytest.raises(InputError):
        check_env({"A": "nul\0"})


def test_write_file_is_atomic_and_keeps_no_temp(tmp_path: Path) -> None:
    ex = LocalExecutor()
    target = tmp_path / "f"
    ex.write_file(str(target), b"one")
    ex.write_file(str(target), b"two" * 1000)
    assert target.read_bytes() == b"two" * 1000
    assert os.listdir(tmp_path) == ["f"]
