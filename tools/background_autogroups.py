"""Keeps `make test`'s background sessions in the background (tools/test-sessions.sh starts it).

Linux's autogroup scheduler (``/proc/sys/kernel/sched_autogroup_enabled``, on by default) shares the
CPU between sessions first and applies ``nice`` only inside one. Every engine, fio run and soak agent
the tests start calls setsid (``start_new_session``, kvgate's detached wrapper), so each gets an
autogroup of its own at nice 0, and ``nice -n 10`` on the background pytest sessions would reach
none of them: a background real vLLM server would weigh as much as the whole timing session. This
loop gives every autogroup whose processes carry the environment marker ``NAME=N`` (set by the
background sessions, inherited by what they start) the nice N, until the given parent process ends;
the parent's own autogroup (the timing session's) is left alone.

Usage: background_autogroups.py PARENT_PID NAME
Stdlib only; processes that vanish while being read are skipped."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Optional

POLL_S = 0.5


def _marked_nice(pid: str, prefix: bytes) -> Optional[int]:
    """N when the process's environment holds NAME=N (``prefix`` is ``NAME=``)."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # gone, or not ours to read
        return None
    for item in env:
        if item.startswith(prefix) and item[len(prefix):].isdigit():
            return int(item[len(prefix):])
    return None


def _group(pid: str) -> tuple[str, int]:
    """``/proc/PID/autogroup`` reads ``/autogroup-N nice X``: (name, X)."""
    name, _, nice = Path(f"/proc/{pid}/autogroup").read_text().split()
    return name, int(nice)


def _renice_group(pid: str, nice: int, spare: str) -> None:
    """Writing a number to ``/proc/PID/autogroup`` sets its group's nice; ``spare`` (the timing
    session's group) is never touched."""
    try:
        name, current = _group(pid)
        if name != spare and current < nice:
            Path(f"/proc/{pid}/autogroup").write_text(str(nice))
    except (OSError, ValueError):
        return


def sweep(prefix: bytes, spare: str) -> None:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (nice := _marked_nice(entry.name, prefix)) is not None:
            _renice_group(entry.name, nice, spare)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    parent, prefix = int(argv[0]), argv[1].encode() + b"="
    if not Path("/proc/self/autogroup").exists():
        return 0  # no autogroups: nice alone does the job
    spare, _ = _group(str(parent))
    while Path(f"/proc/{parent}").exists():
        sweep(prefix, spare)
        time.sleep(POLL_S)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
