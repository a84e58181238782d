"""Detached processes on a node, for any executor that can ``run`` an argument list.

A process is started through two fixed shell scripts (constants below: no user string is ever
part of a script; the command, paths and names are positional parameters ``"$@"``)::

    env KVGATE_MARKER=<uuid> sh -c LAUNCH kvgate-detached <out> <err> <pid> <exit> <cwd> argv...  (K=V lines on stdin)
        └─ setsid sh -c WRAPPER ... argv...   (new session: survives the connection and the controller)
              ├─ writes its pid to <pid>, ignores nothing (TERM is trapped, so children get the default)
              ├─ runs argv with stdin /dev/null, stdout/stderr to <out>/<err>
              └─ writes argv's exit code to <exit> when it ends

The wrapper is the session and process-group leader, so ``pgid == pid`` and stopping signals the
whole group. The marker in the environment (read back from ``/proc/<pid>/environ``) tells our
process apart from an unrelated one that reused the pid; the start time from ``/proc/<pid>/stat``
is the fallback when the environment cannot be read.
"""

from __future__ import annotations

import posixpath
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from harness.errors import InputError
from harness.remote.base import DetachedHandle, Executor, ProcessState, RemoteError
from harness.remote.commands import check_argv, check_env, env_prefix

MARKER_VAR = "KVGATE_MARKER"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")

# Runs in the new session; $1 = pid file, $2 = exit file, the rest is the user's command.
# TERM/INT/HUP are trapped (not ignored) so the command gets the default action while this shell
# stays alive long enough to record the exit code.
WRAPPER = r"""pidf=$1 exf=$2
shift 2
echo $$ > "$pidf.tmp" && mv -f -- "$pidf.tmp" "$pidf"
trap : TERM INT HUP
"$@"
code=$?
echo "$code" > "$exf.tmp" && mv -f -- "$exf.tmp" "$exf"
"""

# Prints "<pid> <start ticks> <btime> <CLK_TCK>" once the wrapper has written its pid file.
_STAT_FN = r"""
proc_stat() {
  st=- ticks=-
  if read -r line < "/proc/$1/stat" 2>/dev/null; then
    rest=${line##*) }
    set -- $rest
    st=$1
    shift 19
    ticks=$1
  fi
  bt=-
  while read -r k v; do if [ "$k" = btime ]; then bt=$v; break; fi; done < /proc/stat
  clk=$(getconf CLK_TCK 2>/dev/null || echo 100)
}
"""

# safe_dir DIR: create DIR (mode 0700) unless it exists, refusing it unless it is safe for the
# files kvgate writes there: every component from / down is a directory owned by root or by us (a
# symbolic link only when root or we own it), a component writable by group or others only with
# the sticky bit (like /tmp), and DIR itself ours and writable by nobody else. So another user's
# planted directory or link (e.g. /tmp/kvgate -> somewhere) is refused, not followed.
SAFE_DIR_FN = r"""
safe_dir() {
  d=$1
  case "$d" in /*) ;; *) echo "kvgate: workdir $d is not absolute" >&2; return 1 ;; esac
  me=$(id -u)
  cur=
  oldifs=$IFS
  IFS=/
  set -f
  for part in ${d#/}; do
    [ -n "$part" ] || continue
    cur="$cur/$part"
    if [ ! -e "$cur" ] && [ ! -L "$cur" ]; then
      # created only below a component already checked, so never through a foreign link
      (umask 077 && mkdir -- "$cur" 2>/dev/null) || [ -d "$cur" ] || {
        IFS=$oldifs; set +f; echo "kvgate: cannot create workdir $d ($cur)" >&2; return 1; }
    fi
    if [ -L "$cur" ]; then
      lu=$(stat -c %u -- "$cur") || return 1
      if [ "$lu" != 0 ] && [ "$lu" != "$me" ]; then
        IFS=$oldifs; set +f
        echo "kvgate: unsafe workdir $d: $cur is a symbolic link owned by uid $lu" >&2; return 1
      fi
    fi
    st=$(stat -L -c '%u %a' -- "$cur") || { IFS=$oldifs; set +f; return 1; }
    u=${st%% *} m=$((0${st#* }))
    if [ "$u" != 0 ] && [ "$u" != "$me" ]; then
      IFS=$oldifs; set +f
      echo "kvgate: unsafe workdir $d: $cur is owned by uid $u, not by us (uid $me) or root" >&2; return 1
    fi
    if [ $((m & 18)) -ne 0 ] && { [ $((m & 512)) -eq 0 ] || [ "$cur" = "$d" ]; }; then
      IFS=$oldifs; set +f
      echo "kvgate: unsafe workdir $d: $cur is writable by group or others" >&2; return 1
    fi
  done
  IFS=$oldifs
  set +f
  if [ "$(stat -L -c %u -- "$d")" != "$me" ]; then
    echo "kvgate: unsafe workdir $d: not owned by uid $me" >&2; return 1
  fi
}
"""

ENSURE_DIR = SAFE_DIR_FN + r"""safe_dir "$1" && echo ok
"""

LAUNCH = _STAT_FN + SAFE_DIR_FN + r"""
out=$1 err=$2 pidf=$3 exf=$4 dir=$5
shift 5
# The command's environment arrives on stdin (NAME=value lines), never in an argument list, so
# secrets in it (HF_TOKEN, VLLM_API_KEY) never show in ps.
while IFS= read -r kv; do export "$kv" || exit 94; done
safe_dir "$(dirname -- "$out")" || exit 95
safe_dir "$(dirname -- "$pidf")" || exit 95
rm -f -- "$out" "$err" "$pidf" "$exf" "$pidf.tmp" "$exf.tmp"
if [ -n "$dir" ]; then cd -- "$dir" || exit 97; fi
set -C  # noclobber: a log file that reappeared (a link planted meanwhile) is never opened
setsid sh -c '""" + WRAPPER.replace("'", "'\\''") + r"""' kvgate-wrapper "$pidf" "$exf" "$@" \
  </dev/null >"$out" 2>"$err" &
set +C
i=0
while [ ! -s "$pidf" ]; do
  i=$((i + 1))
  if [ "$i" -gt 2000 ]; then
    echo "kvgate: the detached process never wrote its pid file $pidf" >&2
    exit 98
  fi
  sleep 0.005
done
read -r pid < "$pidf"
proc_stat "$pid"
echo "$pid $ticks $bt $clk"
"""

# $1 = pid, $2 = marker, $3 = exit file. Prints "<state> <ticks> <btime> <clk> <marker> <exit>".
POLL = _STAT_FN + r"""
pid=$1 marker=$2 exf=$3
proc_stat "$pid"
state=gone
case "$st" in
  -) state=gone ;;
  Z|X|x) state=zombie ;;
  *) state=alive ;;
esac
mk=unknown
if [ "$state" = alive ]; then
  if envtext=$(tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null); then
    if printf '%s\n' "$envtext" | grep -qxF -e "KVGATE_MARKER=$marker"; then mk=yes; else mk=no; fi
  fi
fi
ex=-
if [ -f "$exf" ]; then read -r ex < "$exf" || ex=-; fi
echo "$state $ticks $bt $clk $mk ${ex:--}"
"""

# $1 = pid, $2 = marker, $3 = signal name. Signals the process group only if the pid is still ours.
SIGNAL = r"""
pid=$1 marker=$2 sig=$3
if envtext=$(tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null) \
   && printf '%s\n' "$envtext" | grep -qxF -e "KVGATE_MARKER=$marker"; then
  kill -s "$sig" -- "-$pid" 2>/dev/null || kill -s "$sig" "$pid"
  echo sent
else
  echo notours
fi
"""

# $1 = exit file, $2 = code: records an exit code when the wrapper itself was killed.
RECORD_EXIT = r"""[ -f "$1" ] || { echo "$2" > "$1.tmp" && mv -f -- "$1.tmp" "$1"; }"""


def _start_time(ticks: str, btime: str, clk: str) -> float | None:
    try:
        return int(btime) + int(ticks) / int(clk)
    except ValueError:
        return None


class UnsafeWorkdir(RemoteError):
    """A node directory kvgate would write into is owned by another user or writable by others."""


def ensure_workdir(ex: Executor, path: str) -> str:
    """Create ``path`` on the node (0700) or check it: refused (:class:`UnsafeWorkdir`) when it or
    a parent is another user's, a foreign link, or writable by others (see ``SAFE_DIR_FN``)."""
    if not path.startswith("/") or "\0" in path or "\n" in path:
        raise InputError(f"invalid workdir {path!r}: an absolute path is needed")
    res = ex.run(["sh", "-c", ENSURE_DIR, "kvgate-workdir", path], timeout=60.0, check=False)
    if res.exit_code != 0 or res.stdout.strip() != "ok":
        msg = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else f"cannot prepare workdir {path}"
        raise UnsafeWorkdir(msg + " (set another workdir in the inventory, or fix its owner/mode)",
                            host=ex.node, command=["kvgate-workdir", path], exit_code=res.exit_code,
                            stderr=res.stderr)
    return path


def start_detached(ex: Executor, argv: Sequence[str], *, workdir: str, name: str,
                   env: Mapping[str, str] | None = None, cwd: str | None = None) -> DetachedHandle:
    """Start ``argv`` detached on ``ex``'s node; logs and bookkeeping files live in ``workdir``."""
    args = check_argv(argv)
    if not _NAME.match(name):
        raise InputError(f"invalid detached process name {name!r}: expected [A-Za-z0-9][A-Za-z0-9._-]*")
    if not workdir or "\0" in workdir:
        raise InputError(f"invalid workdir {workdir!r}")
    if cwd is not None and (not cwd or "\0" in cwd):
        raise InputError(f"invalid working directory {cwd!r}")
    marker = uuid.uuid4().hex
    base = posixpath.join(workdir, name)
    paths = {"out": base + ".out", "err": base + ".err", "pid": base + ".pid", "exit": base + ".exit"}
    user_env = dict(env or {})
    if MARKER_VAR in user_env:
        raise InputError(f"{MARKER_VAR} is reserved for kvgate")
    env_lines = check_env(user_env)
    bad = [k for k, v in env_lines.items() if "\n" in v or "\r" in v]
    if bad:
        raise InputError(f"environment variable(s) {', '.join(bad)} contain a line break")
    launcher = [*env_prefix({MARKER_VAR: marker}), "sh", "-c", LAUNCH, "kvgate-detached",
                paths["out"], paths["err"], paths["pid"], paths["exit"], cwd or "", *args]
    stdin = "".join(f"{k}={v}\n" for k, v in env_lines.items()).encode()
    res = ex.run(launcher, timeout=60.0, check=False, stdin=stdin)
    if res.exit_code == 95:
        raise UnsafeWorkdir(res.stderr.strip().splitlines()[-1] if res.stderr.strip() else
                            f"unsafe workdir {workdir}", host=ex.node, command=args, exit_code=95,
                            stderr=res.stderr)
    fields = res.stdout.split()
    if res.exit_code != 0 or len(fields) != 4 or not fields[0].isdigit():
        raise RemoteError("could not start a detached process", host=ex.node, command=args,
                          exit_code=res.exit_code, stdout=res.stdout, stderr=res.stderr)
    pid = int(fields[0])
    start = _start_time(fields[1], fields[2], fields[3])
    return DetachedHandle(node=ex.node, pid=pid, pgid=pid,
                          start_time=start if start is not None else time.time(),
                          marker=marker, workdir=workdir, stdout_path=paths["out"], stderr_path=paths["err"],
                          pid_path=paths["pid"], exit_path=paths["exit"], command=args)


@dataclass(frozen=True)
class _Probe:
    state: str  # alive | zombie | gone
    start_time: float | None
    marker: str  # yes | no | unknown
    exit_code: int | None


def _probe(ex: Executor, handle: DetachedHandle) -> _Probe:
    res = ex.run(["sh", "-c", POLL, "kvgate-poll", str(handle.pid), handle.marker, handle.exit_path],
                 timeout=30.0, check=False)
    f = res.stdout.split()
    if res.exit_code != 0 or len(f) != 6:
        raise RemoteError("could not poll a detached process", host=ex.node, command=handle.command,
                          exit_code=res.exit_code, stdout=res.stdout, stderr=res.stderr)
    code = int(f[5]) if f[5].lstrip("-").isdigit() and f[5] != "-" else None
    return _Probe(state=f[0], start_time=_start_time(f[1], f[2], f[3]), marker=f[4], exit_code=code)


def _ours(handle: DetachedHandle, p: _Probe) -> bool:
    if p.state != "alive":
        return False
    if p.marker != "unknown":
        return p.marker == "yes"
    # Environment unreadable: fall back to the start time (btime may drift by a second).
    return p.start_time is not None and abs(p.start_time - handle.start_time) < 1.5


def _exited(code: int) -> ProcessState:
    reason = f"killed by signal {code - 128}" if code > 128 else f"exited with code {code}"
    return ProcessState(running=False, exit_code=code, reason=reason)


def poll(ex: Executor, handle: DetachedHandle) -> ProcessState:
    """Running, or exited with its recorded exit code, or gone with the reason."""
    p = _probe(ex, handle)
    if _ours(handle, p):
        return ProcessState(running=True)
    if p.exit_code is not None:
        return _exited(p.exit_code)
    if p.state == "alive":
        return ProcessState(running=False, reason=f"pid {handle.pid} was reused by another process; "
                            "ours ended without recording an exit code")
    return ProcessState(running=False, reason="ended without recording an exit code (killed with SIGKILL?)")


def _signal(ex: Executor, handle: DetachedHandle, sig: str) -> bool:
    res = ex.run(["sh", "-c", SIGNAL, "kvgate-signal", str(handle.pid), handle.marker, sig],
                 timeout=30.0, check=False)
    return res.stdout.strip() == "sent"


def _wait_gone(ex: Executor, handle: DetachedHandle, seconds: float) -> ProcessState:
    deadline = time.monotonic() + seconds
    delay = 0.02
    while True:
        state = poll(ex, handle)
        if not state.running or time.monotonic() >= deadline:
            return state
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)


def stop(ex: Executor, handle: DetachedHandle, *, grace: float = 10.0) -> ProcessState:
    """SIGTERM the process group, SIGKILL after ``grace`` seconds; returns the final state."""
    state = poll(ex, handle)
    if not state.running:
        return state
    _signal(ex, handle, "TERM")
    state = _wait_gone(ex, handle, grace)
    if not state.running:
        return state
    _signal(ex, handle, "KILL")
    state = _wait_gone(ex, handle, 10.0)
    if state.running:
        raise RemoteError(f"detached process {handle.pid} survived SIGKILL", host=ex.node,
                          command=handle.command)
    if state.exit_code is None:
        # The wrapper died with its child: record it so later polls agree.
        ex.run(["sh", "-c", RECORD_EXIT, "kvgate-record", handle.exit_path, "137"], timeout=30.0, check=False)
        return ProcessState(running=False, exit_code=137,
                            reason=f"killed by signal 9 after {grace:g} s grace")
    return state


def tail_log(ex: Executor, handle: DetachedHandle, *, stream: str = "stderr", lines: int = 50) -> str:
    if stream not in ("stdout", "stderr"):
        raise InputError(f"stream must be 'stdout' or 'stderr', not {stream!r}")
    path = handle.stdout_path if stream == "stdout" else handle.stderr_path
    res = ex.run(["tail", "-n", str(int(lines)), "--", path], timeout=30.0, check=False)
    if res.exit_code != 0:
        raise RemoteError(f"could not read the {stream} log {path}", host=ex.node, command=handle.command,
                          exit_code=res.exit_code, stderr=res.stderr)
    return res.stdout


class DetachedByRun:
    """The detached-process verbs of the Executor protocol through this module's scripts, for an
    executor that can ``run`` an argument list: the local, SSH and Ray executors inherit them, so
    the three start, poll, stop and read processes the one same way."""

    def start_detached(self, argv: Sequence[str], *, workdir: str, name: str,
                       env: Mapping[str, str] | None = None, cwd: str | None = None) -> DetachedHandle:
        return start_detached(cast(Executor, self), argv, workdir=workdir, name=name, env=env, cwd=cwd)

    def poll(self, handle: DetachedHandle) -> ProcessState:
        return poll(cast(Executor, self), handle)

    def stop(self, handle: DetachedHandle, *, grace: float = 10.0) -> ProcessState:
        return stop(cast(Executor, self), handle, grace=grace)

    def tail_log(self, handle: DetachedHandle, *, stream: str = "stderr", lines: int = 50) -> str:
        return tail_log(cast(Executor, self), handle, stream=stream, lines=lines)
