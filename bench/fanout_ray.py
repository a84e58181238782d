"""`kvgate facts` over N nodes through SSH (loopback sshd) and through Ray (node actors on a local
Ray cluster), in the same run: wall time and the controller's CPU seconds, and their ratio.

The controller is this process: its CPU time (``time.process_time``, every thread, Ray's own
included) is what one controller spends; the sshd servers, the raylet and the actors are the
nodes' side. Ray runs in a network and PID namespace (``tests/support/raycluster.py``; Ray binds the
machine's interface address otherwise), so ``main`` re-runs this module inside one; the sshd
servers run in the same namespace, on its loopback. The N Ray nodes are N custom resources of one
raylet (one machine has one), each with its own actor, as N machines would have.

Ray is measured three ways: *join* (``ray.init``: once per controller process), *cold* (the actors
are started: the first command on a new cluster), *warm* (detached actors already there: every
later `kvgate` command, from any controller). The ratio compares what one `kvgate facts` costs:
join + warm for Ray, connect + commands for SSH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.config.inventory import Inventory  # noqa: E402
from harness.facts.fanout import NodeUnreachable, collect_inventory_facts  # noqa: E402
from tests.support.raycluster import ADDRESS, namespace_argv  # noqa: E402
from tests.support.sshd import KeyStore, SshCluster  # noqa: E402


def _measure(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, float, Any]:
    c0, t0 = time.process_time(), time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - t0, time.process_time() - c0, value


def _facts_ok(results: dict[str, Any], n: int) -> None:
    bad = [name for name, r in results.items() if isinstance(r, NodeUnreachable)]
    if len(results) != n or bad:
        raise RuntimeError(f"facts: {len(results)} of {n} nodes answered, unreachable: {bad}")


def _ray_inventory(n: int) -> Inventory:
    return Inventory.model_validate({
        "cluster": f"ray-{n}", "defaults": {"connection": "ray", "ray": {"address": ADDRESS}},
        "nodes": [{"name": f"n{i}", "host": "127.0.0.1", "ray": {"resource": f"kvgate-node:n{i}"}}
                  for i in range(n)]})


def _kill_actors(inv: Inventory) -> None:
    from harness.remote.ray import cluster
    from harness.remote.ray.actorbook import book_key, controller_book

    ray = cluster.ray_module()
    book = controller_book()  # `kvgate facts` records the actors it starts there
    for node in inv.nodes:
        rec = book.recall(book_key(ADDRESS, cluster.DEFAULT_NAMESPACE, node.name))
        try:
            if rec is not None:
                ray.kill(ray.get_actor(rec.name), no_restart=True)
        except ValueError:
            pass


def _import_cpu(module: str) -> float:
    """CPU seconds a fresh Python spends importing ``module`` (each client's fixed cost per process)."""
    code = f"import time; c = time.process_time(); import {module}; print(time.process_time() - c)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,  # noqa: S603
                         timeout=120)
    return float(out.stdout.split()[-1])


def inner(sizes: list[int], work: Path) -> dict[str, Any]:
    """Runs in the namespace, with the cluster up: one row per N."""
    from harness.remote.ray import cluster

    imports = {m: _import_cpu(m) for m in ("ray", "paramiko")}
    join_wall, join_cpu, _ = _measure(cluster.connect, ADDRESS)  # `import ray` included: not imported yet
    rows = []
    keys = KeyStore(work / "k")
    for n in sizes:
        ssh = SshCluster.start(n, work / f"c{n}", keys)
        try:
            collect_inventory_facts(ssh.inventory, nodes=[ssh.nodes[0].name])  # warm imports
            s_wall, s_cpu, res = _measure(collect_inventory_facts, ssh.inventory, parallel=16)
            _facts_ok(res, n)
        finally:
            ssh.close()
        inv = _ray_inventory(n)
        c_wall, c_cpu, res = _measure(collect_inventory_facts, inv, parallel=16)
        _facts_ok(res, n)  # the actors' start-up is part of it (a worker process each)
        w_wall, w_cpu, res = _measure(collect_inventory_facts, inv, parallel=16)
        _facts_ok(res, n)
        _kill_actors(inv)
        rows.append({"n": n, "ssh_wall": s_wall, "ssh_cpu": s_cpu, "ray_cold_wall": c_wall, "ray_cold_cpu": c_cpu,
                     "ray_warm_wall": w_wall, "ray_warm_cpu": w_cpu})
    return {"join_wall": join_wall, "join_cpu": join_cpu, "rows": rows, "imports": imports}


def report(data: dict[str, Any]) -> None:
    jc = data["join_cpu"]
    imp = data.get("imports", {})
    print(f"\n# `kvgate facts`: SSH (loopback sshd) vs Ray (node actors), controller = this process; "
          f"Ray join (import ray + ray.init) once: {data['join_wall']:.2f} s wall, {jc:.2f} s CPU "
          f"(import alone, in a fresh process: ray {imp.get('ray', float('nan')):.2f} s, paramiko "
          f"{imp.get('paramiko', float('nan')):.2f} s CPU; SSH's columns exclude paramiko's import)")
    head = (f"{'nodes':>5}  {'SSH wall s':>10} {'SSH CPU s':>9}  {'Ray cold wall':>13} {'cold CPU':>8}  "
            f"{'Ray warm wall':>13} {'warm CPU':>8}  {'CPU warm/SSH':>12} {'CPU +join':>9} {'per process':>11}")
    print(head)
    for r in data["rows"]:
        print(f"{r['n']:>5}  {r['ssh_wall']:>10.2f} {r['ssh_cpu']:>9.2f}  {r['ray_cold_wall']:>13.2f} "
              f"{r['ray_cold_cpu']:>8.2f}  {r['ray_warm_wall']:>13.2f} {r['ray_warm_cpu']:>8.2f}  "
              + "  ".join(f"{x:>{w}.2f}" for x, w in zip(_ratios(data, r), (12, 9, 11))))
    print("CPU warm/SSH: a controller already joined to the cluster, node actors running (they are detached:\n"
          "started once per cluster). +join: one `kvgate facts` that also joins (import ray + ray.init) against\n"
          "SSH without paramiko's import. per process: both with their client library's import (Ray: join +\n"
          "warm; SSH: import paramiko + SSH). Goal at 32 nodes: <= 0.33.")
    at32 = next((r for r in data["rows"] if r["n"] == 32), None)
    if at32 is not None and at32["ssh_cpu"] > 0:
        warm, joined, per_process = _ratios(data, at32)
        met = {True: "met", False: "NOT met"}
        print(f"at 32 nodes: warm {warm:.2f} (goal {met[warm <= 1 / 3]}), +join {joined:.2f}, "
              f"per process {per_process:.2f} (goal {met[per_process <= 1 / 3]})")


def _ratios(data: dict[str, Any], r: dict[str, Any]) -> tuple[float, float, float]:
    if r["ssh_cpu"] <= 0:
        return (float("nan"),) * 3
    ssh_import = data.get("imports", {}).get("paramiko", float("nan"))
    return (r["ray_warm_cpu"] / r["ssh_cpu"], (data["join_cpu"] + r["ray_warm_cpu"]) / r["ssh_cpu"],
            (data["join_cpu"] + r["ray_warm_cpu"]) / (ssh_import + r["ssh_cpu"]))


def main(sizes: list[int]) -> int:
    """Run the comparison in a fresh namespace with a Ray cluster of max(sizes) simulated nodes."""
    if not shutil.which("unshare"):
        print("unshare (util-linux) not found: the Ray comparison needs a network namespace", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="kvr-", dir="/tmp"))
    out = work / "result.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--inner", ",".join(map(str, sizes)), str(work), str(out)]
    # Ray's 60 s for a raylet to register was passed by the head of 32 resources at load 6 here
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_raylet_start_wait_time_s="300")
    try:
        proc = subprocess.run(namespace_argv(work, cmd, head_nodes=[f"n{i}" for i in range(max(sizes))],  # noqa: S603
                                             worker_nodes=[]), cwd=ROOT, env=env)
        if proc.returncode != 0 or not out.exists():
            print(f"the Ray comparison failed (exit {proc.returncode})", file=sys.stderr)
            return 1
        report(json.loads(out.read_text()))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--inner"]:
        result = inner([int(x) for x in sys.argv[2].split(",")], Path(sys.argv[3]))
        Path(sys.argv[4]).write_text(json.dumps(result))
        sys.exit(0)
    sys.exit(main([int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "8,32").split(",")]))
