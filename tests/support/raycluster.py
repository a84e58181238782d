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
PORT = 6380
ADDRESS = f"127.0.0.1:{PORT}"


def namespace_argv(workdir: Path, cmd: list[str], *, head_nodes: list[str], worker_nodes: list[str]) -> list[str]:
    """The command line that runs ``cmd`` next to a fresh cluster in new network and PID namespaces."""
    unshare = shutil.which("unshare") or "unshare"
    return [unshare, "--net", "--pid", "--fork", "--mount-proc", sys.executable, str(Path(__file__).resolve()),
            str(workdir), "--head-nodes", ",".join(head_nodes), "--worker-nodes", ",".join(worker_nodes), "--", *cmd]


def _ray(*args: str, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "ray.scripts.scripts", *args], check=True, env=env,  # noqa: S603
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)


def _resources(names: list[str]) -> str:
    return json.dumps({f"kvgate-node:{n}": 1 for n in names})


def start(temp: Path, head_nodes: list[str], worker_nodes: list[str]) -> list[dict[str, object]]:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)  # noqa: S603, S607
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    common = ["--node-ip-address=127.0.0.1", f"--temp-dir={temp}", "--disable-usage-stats"]
    t0 = time.monotonic()
    _ray("start", "--head", f"--port={PORT}", "--num-cpus=2", "--include-dashboard=false",
         f"--resources={_resources(head_nodes)}", *common, env=env)
    print(f"ray head up in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    if worker_nodes:
        _ray("start", f"--address={ADDRESS}", "--num-cpus=0", f"--resources={_resources(worker_nodes)}",
             *common, env=env)
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
        except subprocess.CalledProcessError as exc:
            print(f"ray start failed: {exc.stderr.decode(errors='replace')[-3000:]}", file=sys.stderr)
            return 90
        env = dict(os.environ, KVGATE_RAY_ADDRESS=ADDRESS, KVGATE_RAY_NODES=json.dumps(nodes),
                   KVGATE_RAY_TEMP=str(temp), KVGATE_RAY_START_S=f"{time.monotonic() - t0:.1f}")
        try:
            return subprocess.run(cmd, env=env).returncode  # noqa: S603 - the caller's command
        finally:
            _stop_namespace()
    finally:
        _keep_logs(temp, args.workdir / "ray-logs")


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
