"""A local Ray cluster for the tests and the fan-out benchmark, started and stopped by them.

Ray advertises and binds the machine's interface address even when told 127.0.0.1, so the cluster
runs in its own network namespace, where loopback is the only address, and its own PID namespace,
so that stopping it (``ray stop``, and the kernel when the namespace's first process exits) can
only ever reach its own processes, never another Ray on the machine::

    unshare --net --pid --fork --mount-proc python tests/support/raycluster.py WORKDIR -- CMD...

runs CMD inside, with the cluster up (``KVGATE_RAY_ADDRESS``, ``KVGATE_RAY_NODES``: JSON of the
Ray nodes with their custom resources and ids, ``KVGATE_RAY_TEMP``: Ray's files and logs, a short
directory of its own under /tmp, removed afterwards with Ray's logs kept in WORKDIR/ray-logs), and
exits with CMD's exit code. The head declares the resources ``kvgate-node:<name>`` of
``--head-nodes`` (many simulated nodes on one raylet); one extra raylet (``--worker-nodes``)
stands for a second machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RAY_START = Path(__file__).resolve().with_name("raystart.py")  # `ray start`, the raylet given every agent port
PORT = 6380
ADDRESS = f"127.0.0.1:{PORT}"


def namespace_argv(workdir: Path, cmd: list[str], *, head_nodes: list[str], worker_nodes: list[str]) -> list[str]:
    """The command line that runs ``cmd`` next to a fresh cluster in new network and PID namespaces."""
    unshare = shutil.which("unshare") or "unshare"
    return [unshare, "--net", "--pid", "--fork", "--mount-proc", sys.executable, str(Path(__file__).resolve()),
            str(workdir), "--head-nodes", ",".join(head_nodes), "--worker-nodes", ",".join(worker_nodes), "--", *cmd]


class RayStartError(RuntimeError):
    """``ray start`` failed or did not return; carries its output for the evidence."""


def _ray(*args: str, env: dict[str, str]) -> None:
    # its output into a file, not a pipe: a daemon it spawns that kept the pipe open would hold
    # subprocess.run until the timeout after the CLI itself had exited
    with tempfile.TemporaryFile() as out:
        try:
            subprocess.run([sys.executable, str(RAY_START), *args], check=True, env=env,  # noqa: S603
                           stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, timeout=300)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            out.seek(0)
            text = out.read().decode(errors="replace")[-3000:]
            if isinstance(exc, subprocess.CalledProcessError):
                why = f"exit {exc.returncode}"
            else:
                why = f"no return in {exc.timeout:.0f} s"
            raise RayStartError(f"ray {args[0]} {args[1]} failed ({why}):\n{text}") from exc


def _resources(names: list[str]) -> str:
    return json.dumps({f"kvgate-node:{n}": 1 for n in names})


def _agent_ports(base: int) -> list[str]:
    """Fixed ports for a raylet's agents. Given none, the raylet waits for the agents to write the
    ports they took to files, for a fixed 15 s, and dies when one is late (ray-project/ray#65983):
    seen in CI runs beside a CPU hog, where the test's processes got a few percent of a core (the
    listen port reaches the raylet only through ``raystart.py``). The namespace is the test's own,
    so fixed ports collide with nothing outside it."""
    return [f"--metrics-export-port={base}", f"--dashboard-agent-grpc-port={base + 1}",
            f"--dashboard-agent-listen-port={base + 2}", f"--runtime-env-agent-port={base + 3}"]


def start(temp: Path, head_nodes: list[str], worker_nodes: list[str]) -> list[dict[str, object]]:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)  # noqa: S603, S607
    # the agents' ports known, the raylet still waits for the runtime-env agent to answer, 30 s by
    # default; beside a hog that agent took 14 s to listen: a hang guard instead of a measure
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_agent_register_timeout_ms="240000")
    common = ["--node-ip-address=127.0.0.1", f"--temp-dir={temp}", "--disable-usage-stats"]
    t0 = time.monotonic()
    _ray("start", "--head", f"--port={PORT}", "--num-cpus=2", "--include-dashboard=false",
         f"--resources={_resources(head_nodes)}", *_agent_ports(21000), *common, env=env)
    print(f"ray head up in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    if worker_nodes:
        _ray("start", f"--address={ADDRESS}", "--num-cpus=0", f"--resources={_resources(worker_nodes)}",
             *_agent_ports(21010), *common, env=env)
    print(f"ray worker raylet up at {time.monotonic() - t0:.1f} s", file=sys.stderr)
    return _nodes(len(worker_nodes) > 0)


def _nodes(extra: bool) -> list[dict[str, object]]:
    import ray

    ray.init(address=ADDRESS, logging_level="WARNING", log_to_driver=False, configure_logging=False)
    try:
        deadline = time.monotonic() + 120
        while True:
            nodes = [n for n in ray.nodes() if n.get("Alive")]
            if len(nodes) == 1 + int(extra) or time.monotonic() > deadline:
                return [{"node_id": n["NodeID"], "ip": n["NodeManagerAddress"],
                         "resources": sorted(k for k in n["Resources"] if k.startswith("kvgate-node:"))}
                        for n in nodes]
            time.sleep(0.2)
    finally:
        ray.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--head-nodes", default="")
    ap.add_argument("--worker-nodes", default="")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, cmd = ap.parse_args(argv[:cut]), argv[cut + 1:]
    split = [x for x in args.head_nodes.split(",") if x], [x for x in args.worker_nodes.split(",") if x]
    t0 = time.monotonic()
    # Ray's unix sockets live under its temp dir, at most 107 bytes a path: a pytest tmp path
    # (/tmp/pytest-of-root/pytest-NNNN/popen-gwN/ray0/...) left too few, so a short one of our own
    temp = Path(tempfile.mkdtemp(prefix="kvray-", dir="/tmp"))
    try:
        try:
            nodes = start(temp, *split)
        except RayStartError as exc:
            print(f"{exc}\n(after {time.monotonic() - t0:.0f} s)\n{_processes()}\n{_log_tails(temp)}", file=sys.stderr)
            return 90
        env = dict(os.environ, KVGATE_RAY_ADDRESS=ADDRESS, KVGATE_RAY_NODES=json.dumps(nodes),
                   KVGATE_RAY_TEMP=str(temp), KVGATE_RAY_START_S=f"{time.monotonic() - t0:.1f}")
        try:
            return subprocess.run(cmd, env=env).returncode  # noqa: S603 - the caller's command
        finally:
            _stop_namespace()
    finally:
        _keep_logs(temp, args.workdir / "ray-logs")


def _processes() -> str:
    """This namespace's processes (its own /proc): which of Ray's were up, which were busy."""
    ps = subprocess.run(["ps", "-eo", "pid,ppid,stat,etime,time,args", "--width", "200"],  # noqa: S603, S607
                        capture_output=True, text=True, timeout=30, check=False)
    return f"processes:\n{ps.stdout}"


def _log_tails(temp: Path, lines: int = 25) -> str:
    """The last lines of each of Ray's non-empty logs, largest-risk first (the GCS and raylet), for
    the evidence of a start that failed or hung: the temp dir goes with this process."""
    logs = temp / "session_latest" / "logs"
    files = sorted((f for f in logs.glob("*") if f.is_file() and f.stat().st_size > 0),
                   key=lambda f: (not f.name.startswith(("gcs_server", "raylet")), f.name)) if logs.is_dir() else []
    parts = [f"Ray logs in {logs}: {', '.join(f.name for f in files) or 'none'}"]
    for f in files[:8]:
        tail = f.read_text(errors="replace").splitlines()[-lines:]
        parts.append(f"--- {f.name} (last {len(tail)} lines)\n" + "\n".join(line[:300] for line in tail))
    return "\n".join(parts)


def _keep_logs(temp: Path, dest: Path) -> None:
    """Ray's logs into the caller's work directory (evidence of a failed run), then the temp dir
    this process created is removed."""
    logs = temp / "session_latest" / "logs"
    if logs.is_dir():
        shutil.copytree(logs, dest, dirs_exist_ok=True, ignore_dangling_symlinks=True)
    shutil.rmtree(temp, ignore_errors=True)


def _stop_namespace() -> None:
    """This process is the PID namespace's init: signal every other process of the namespace (and
    only those: kill(-1) from a namespace's init reaches its own processes), then exit, after which
    the kernel kills whatever is left."""
    import signal

    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.kill(-1, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    time.sleep(0.05)
            except ChildProcessError:
                return  # no process left


if __name__ == "__main__":
    sys.exit(main())
