"""The Executor contract, run against every executor (``executor`` fixture in conftest.py):
quoting and injection, env/cwd, exit codes, timeouts, big output, streaming, files, detached processes."""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from pathlib import Path

import pytest

from harness.errors import InputError
from harness.remote.base import (
    CommandFailed,
    CommandTimeout,
    DetachedHandle,
    Executor,
    RemoteFileNotFound,
)
from tests.support.procs import processes_running, unique_sleep, wait_for

# Strings that would run a second command if they ever reached a shell unquoted.
NASTY = [
    "a; touch {canary}",
    "$(touch {canary})",
    "`touch {canary}`",
    "' ; touch {canary} ; '",
    '" ; touch {canary} ; "',
    "line1\ntouch {canary}",
    "two words  and\ttab",
    "| touch {canary}",
    "&& touch {canary}",
    "> {canary}",
    "*",
    "-n",
    "$HOME ${{PATH}} %s \\ \\n",
]


def _nasty(canary: Path) -> list[str]:
    return [s.format(canary=canary) for s in NASTY]


def test_protocol(executor: Executor) -> None:
    assert isinstance(executor, Executor)
    assert executor.node


def test_run_returns_result(executor: Executor) -> None:
    r = executor.run(["sh", "-c", "echo out; echo err >&2; exit 0"])
    assert r.ok and r.exit_code == 0
    assert r.stdout == "out\n" and r.stderr == "err\n"
    assert r.host == executor.node
    assert r.command == ("sh", "-c", "echo out; echo err >&2; exit 0")
    assert r.duration_s >= 0


def test_nonzero_exit_check(executor: Executor) -> None:
    with pytest.raises(CommandFailed) as ei:
        executor.run(["sh", "-c", "echo boom >&2; exit 3"])
    err = ei.value
    assert err.exit_code == 3 and err.host == executor.node
    assert "boom" in str(err) and "exit code: 3" in str(err)
    r = executor.run(["sh", "-c", "exit 5"], check=False)
    assert r.exit_code == 5 and not r.ok


def test_killed_by_signal_is_128_plus_n(executor: Executor) -> None:
    r = executor.run(["sh", "-c", "kill -9 $$"], check=False)
    assert r.exit_code == 137


def test_missing_program_is_127(executor: Executor) -> None:
    r = executor.run(["kvgate-no-such-program-xyz"], check=False)
    assert r.exit_code == 127


def test_args_are_not_interpreted(executor: Executor, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    args = _nasty(canary)
    r = executor.run(["printf", "%s\\0", *args])
    assert r.stdout.split("\0")[:-1] == args
    assert not canary.exists()


def test_env_values_are_not_interpreted(executor: Executor, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    for i, value in enumerate(_nasty(canary)):
        r = executor.run(["sh", "-c", 'printf %s "$KV_TEST"'], env={"KV_TEST": value, "KV_OTHER": str(i)})
        assert r.stdout == value
    assert not canary.exists()


def test_bad_env_name_refused(executor: Executor) -> None:
    for bad in ["A;B", "1A", "A B", "$(x)", ""]:
        with pytest.raises(InputError):
            executor.run(["true"], env={bad: "x"})


def test_string_command_refused(executor: Executor) -> None:
    with pytest.raises(InputError):
        executor.run("echo hi")  # type: ignore[arg-type]


def test_cwd_with_nasty_name(executor: Executor, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    for i, name in enumerate(s for s in _nasty(canary) if "/" not in s):
        d = tmp_path / f"{i}-{name}"
        d.mkdir()
        r = executor.run(["pwd"], cwd=str(d))
        assert r.stdout.rstrip("\n") == str(d)
    assert not canary.exists()
    r = executor.run(["pwd"], cwd=str(tmp_path / "does-not-exist"), check=False)
    assert r.exit_code != 0


def test_stdin(executor: Executor) -> None:
    data = b"hello\nworld\n" * 1000
    r = executor.run(["wc", "-c"], stdin=data)
    assert int(r.stdout.strip()) == len(data)


def test_big_output_both_streams(executor: Executor) -> None:
    # 12 MiB on each stream, interleaved: a reader that drains one pipe at a time would deadlock.
    script = "i=0; while [ $i -lt 12 ]; do head -c 1048576 /dev/zero | tr '\\0' a; " \
             "head -c 1048576 /dev/zero | tr '\\0' b >&2; i=$((i+1)); done"
    r = executor.run(["sh", "-c", script], timeout=120)
    assert len(r.stdout) == 12 * 1048576 and set(r.stdout) == {"a"}
    assert len(r.stderr) == 12 * 1048576 and set(r.stderr) == {"b"}


def test_on_line_streams_lines(executor: Executor) -> None:
    seen: list[tuple[str, str]] = []
    executor.run(["sh", "-c", "echo one; echo two >&2; echo three"],
                 on_line=lambda s, line: seen.append((s, line)))
    assert [x for x in seen if x[0] == "stdout"] == [("stdout", "one"), ("stdout", "three")]
    assert ("stderr", "two") in seen


def test_on_line_arrives_before_the_end(executor: Executor, tmp_path: Path) -> None:
    # on an event, not a clock: the command prints its second line only once the first line's
    # callback has made a file; lines held back to the end would leave it waiting until the timeout
    go = tmp_path / "go"
    seen: list[str] = []

    def on_line(stream: str, line: str) -> None:
        seen.append(line)
        if line == "first":
            go.touch()

    executor.run(["sh", "-c", 'echo first; while [ ! -e "$1" ]; do sleep 0.05; done; echo second', "sh", str(go)],
                 on_line=on_line, timeout=120)
    assert seen == ["first", "second"]


def test_timeout_kills_process_group(executor: Executor) -> None:
    # Whichever side of the command's start the deadline falls (a loaded node can start it late),
    # nothing of the command may outlive the timeout: its sleep carries a marker no other process has.
    marker = unique_sleep()
    start = time.monotonic()
    with pytest.raises(CommandTimeout) as ei:
        executor.run(["sh", "-c", f"sleep {marker} & echo started; wait"], timeout=1.0)
    # below the sleep's own 60 s, so a timeout that only fired once the command ended fails here
    assert time.monotonic() - start < 45
    assert ei.value.host == executor.node
    wait_for(lambda: not processes_running(["sleep", marker]), 30, f"the timed-out command's sleep {marker} to end")


def test_put_get_with_checksum(executor: Executor, tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    payload = os.urandom(3 * 1024 * 1024 + 17)
    src.write_bytes(payload)
    remote = tmp_path / "remote dir; $(x)"
    remote.mkdir()
    dest = remote / "copy.bin"
    executor.put(str(src), str(dest), mode=0o600)
    assert dest.read_bytes() == payload
    assert (dest.stat().st_mode & 0o777) == 0o600
    back = tmp_path / "back.bin"
    executor.get(str(dest), str(back))
    assert hashlib.sha256(back.read_bytes()).digest() == hashlib.sha256(payload).digest()


def test_get_missing_file(executor: Executor, tmp_path: Path) -> None:
    with pytest.raises(RemoteFileNotFound):
        executor.get(str(tmp_path / "missing"), str(tmp_path / "dest"))
    assert not (tmp_path / "dest").exists()


def test_read_write_file(executor: Executor, tmp_path: Path) -> None:
    p = tmp_path / "small; `x`.txt"
    executor.write_file(str(p), b"abc\x00def", mode=0o640)
    assert p.read_bytes() == b"abc\x00def"
    assert (p.stat().st_mode & 0o777) == 0o640
    assert executor.read_file(str(p)) == b"abc\x00def"
    executor.write_file(str(p), b"replaced")
    assert executor.read_file(str(p)) == b"replaced"
    assert [x.name for x in tmp_path.iterdir()] == [p.name], "temp file left behind"
    with pytest.raises(RemoteFileNotFound):
        executor.read_file(str(tmp_path / "missing"))
    with pytest.raises(Exception) as ei:
        executor.read_file(str(p), max_bytes=3)
    assert "larger" in str(ei.value)


def test_which(executor: Executor) -> None:
    sh = executor.which("sh")
    assert sh is not None and os.path.isabs(sh)
    assert executor.which("kvgate-no-such-tool") is None
    assert executor.which("sh; touch /tmp/x") is None


def test_detached_lifecycle(executor: Executor, tmp_path: Path) -> None:
    work = str(tmp_path / "work dir")
    h = executor.start_detached(["sh", "-c", 'echo "out:$KV_X"; echo err >&2; sleep 30'], workdir=work,
                                name="proc1", env={"KV_X": "v; $(y)"}, cwd=str(tmp_path))
    try:
        assert h.node == executor.node and h.pid > 1 and h.pgid == h.pid
        assert abs(h.start_time - time.time()) < 5
        assert executor.poll(h).running
        wait_for(lambda: "out:" in executor.tail_log(h, stream="stdout"), 10.0, "the command's first output", poll=0.05)
        assert executor.tail_log(h, stream="stdout") == "out:v; $(y)\n"
        assert executor.tail_log(h, stream="stderr") == "err\n"
        # The handle survives a JSON round trip and secrets are not in it.
        again = DetachedHandle.from_json(json.loads(json.dumps(h.to_json())))
        assert again == h
        assert "v; $(y)" not in json.dumps(h.to_json())
        state = executor.stop(again, grace=5)
        assert not state.running and state.exit_code == 143 and "signal 15" in state.reason
        assert executor.poll(h) == state
    finally:
        executor.stop(h, grace=1)


def test_detached_exit_code_recorded(executor: Executor, tmp_path: Path) -> None:
    h = executor.start_detached(["sh", "-c", "exit 7"], workdir=str(tmp_path), name="quick")
    wait_for(lambda: not executor.poll(h).running, 10.0, "the detached command to end", poll=0.05)
    st = executor.poll(h)
    assert st.exit_code == 7 and "exited with code 7" in st.reason


def test_detached_sigkill_after_grace(executor: Executor, tmp_path: Path) -> None:
    h = executor.start_detached(["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"],
                                workdir=str(tmp_path), name="stubborn")
    start = time.monotonic()
    st = executor.stop(h, grace=0.5)
    assert 0.5 <= time.monotonic() - start < 8
    assert not st.running and st.exit_code == 137
    assert executor.poll(h).exit_code == 137


def test_detached_pid_reuse_not_mistaken(executor: Executor, tmp_path: Path) -> None:
    h = executor.start_detached(["sleep", "30"], workdir=str(tmp_path), name="mine")
    other = executor.start_detached(["sleep", "30"], workdir=str(tmp_path), name="other")
    try:
        # A handle whose pid now belongs to another process (the other one), with our marker.
        forged = DetachedHandle.from_json({**h.to_json(), "pid": other.pid, "pgid": other.pgid,
                                           "exit_path": str(tmp_path / "none.exit")})
        st = executor.poll(forged)
        assert not st.running and "reused" in st.reason
        # stop must not signal the other process
        executor.stop(forged, grace=0.5)
        assert executor.poll(other).running
        # A fake marker for a live pid is not ours either.
        fake = DetachedHandle.from_json({**h.to_json(), "marker": uuid.uuid4().hex})
        assert not executor.poll(fake).running
    finally:
        executor.stop(h, grace=1)
        executor.stop(other, grace=1)


def test_detached_bad_name_refused(executor: Executor, tmp_path: Path) -> None:
    for bad in ["../x", "a/b", "a;b", "", "$(x)"]:
        with pytest.raises(InputError):
            executor.start_detached(["true"], workdir=str(tmp_path), name=bad)


