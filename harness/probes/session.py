"""Probes over an inventory (``kvgate probe``): pick the (node, target) pairs a profile asks for, run
the probes with one executor per node, write ``results.json`` next to the raw evidence. One-node
probes run through ``registry.run_probe_on``, the runner the gate pipelines use too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from harness.config.inventory import Inventory, StorageTarget
from harness.config.profile import Profile
from harness.errors import InfraError, InputError
from harness.probes.blkthrottle import Cgroup, clean_stale, create_cgroup, plan_node, remove_cgroup
from harness.probes.errors import ProbeError, ProbeRefused
from harness.probes.fio_run import (
    ProbeFailure,
    ServerSpec,
    run_fio_client_server,
    run_fio_probes,
)
from harness.probes.registry import get_probe, run_probe_on
from harness.probes.selection import select_targets
from harness.probes.tables import (  # noqa: F401  (the CLI's tables, re-exported)
    FIO_HEADERS,
    PARSE_HEADERS,
    checkpoint_rows,
    fio_cluster_rows,
    fio_rows,
    modelload_rows,
    parse_saved,
    parsed_json,
    parsed_rows,
)
from harness.progress import Progress
from harness.remote.base import Executor, RemoteError
from harness.remote.cgroupjoin import CgroupExecutor
from harness.remote.connect import executor_for

RESULTS_SCHEMA = "kvgate.probes/1"



def default_out_dir(kind: str) -> Path:
    from harness.paths import reports_dir

    return reports_dir() / f"probe-{kind}-{time.strftime('%Y%m%d-%H%M%S')}"


def _write_results(out_dir: Path, data: dict[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "results.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    tmp.replace(path)
    return path


@dataclass
class ProbeReport:
    """Everything one ``kvgate probe`` run produced: results, failures, and where they are."""

    kind: str
    out_dir: Path
    results: list[Any] = field(default_factory=list)
    failures: list[ProbeFailure] = field(default_factory=list)
    results_path: Optional[Path] = None

    def raise_for_failures(self) -> None:
        """After results are saved: an InputError when every failure was a refusal, else InfraError."""
        if not self.failures:
            return
        lines = [f"  {f.node}/{f.target}: {f.error}" for f in self.failures]
        text = f"{len(self.failures)} probe(s) did not run to the end (results so far in {self.out_dir}):\n"
        if all(isinstance(f.error, (ProbeRefused, InputError)) for f in self.failures):
            raise InputError(text + "\n".join(lines))
        raise InfraError(text + "\n".join(lines))


class _Capped(CgroupExecutor):
    """A node's executor in the cgroup that enforces its targets' provisioned rates, as in a gate run
    (``harness.probes.blkthrottle``); ``_close`` removes the cgroup."""

    def __init__(self, inner: Executor, cgroup: Cgroup) -> None:
        super().__init__(inner, cgroup.procs_file)
        self.cgroup = cgroup


def _executors(inventory: Inventory, names: Sequence[str], accept_new_host_keys: bool) -> dict[str, Executor]:
    """One executor per node; a node with targets whose provisioned rate kvgate enforces gets its
    cgroup first (refused, exit 2, where it cannot be had), so a probe measures what a gate would."""
    out: dict[str, Executor] = {}
    try:
        for n in names:
            out[n] = ex = executor_for(inventory, n, accept_new_host_keys=accept_new_host_keys)
            plan = plan_node(ex, inventory.node(n))
            if plan is not None:
                clean_stale(ex)
                out[n] = _Capped(ex, create_cgroup(ex, plan, campaign="kvgate-probe", gate="probe"))
    except BaseException:
        _close(out)
        raise
    return out


def _close(executors: dict[str, Executor]) -> None:
    for ex in executors.values():
        try:
            if isinstance(ex, _Capped):
                remove_cgroup(ex.inner, ex.cgroup)
            ex.close()
        except RemoteError:
            pass


def probe_fio(
    inventory: Inventory,
    profile: Profile,
    out_dir: Path,
    *,
    node: Optional[str] = None,
    target: Optional[str] = None,
    accept_new_host_keys: bool = False,
    progress: Optional[Progress] = None,
) -> ProbeReport:
    """fio on every selected (node, target), nodes in parallel; writes ``results.json``."""
    spec = profile.probes.fio
    pairs = select_targets(inventory, spec.targets, node=node, target=target)
    executors = _executors(inventory, list(dict.fromkeys(n.name for n, _ in pairs)), accept_new_host_keys)
    report = ProbeReport("fio", out_dir)
    try:

        def say(text: str) -> None:
            if progress is not None:
                progress.status(text, force=True)

        outcomes = run_fio_probes([(executors[n.name], t) for n, t in pairs], spec, out_dir, progress=say)
    finally:
        _close(executors)
    for o in outcomes:
        if isinstance(o, ProbeFailure):
            report.failures.append(o)
        else:
            report.results.append(o)
        if progress is not None:
            progress.update(1, f"{o.node}/{o.target}")
    bandwidth: dict[str, dict[str, dict[str, dict[str, Optional[float]]]]] = {}
    for r in report.results:
        for name, js in r.job_sets.items():
            bandwidth.setdefault(r.node, {}).setdefault(r.target, {})[name] = {
                "read_bw_bytes": js.read_bw_bytes,
                "write_bw_bytes": js.write_bw_bytes,
            }
    report.results_path = _write_results(
        out_dir,
        {
            "schema": RESULTS_SCHEMA,
            "kind": "fio",
            "profile": profile.name,
            "cluster": inventory.cluster,
            "spec": spec.model_dump(mode="json"),
            "bandwidth_bytes_per_s": bandwidth,
            "results": [r.to_json(relative_to=out_dir) for r in report.results],
            "failures": [
                {"node": f.node, "target": f.target, "error": str(f.error)} for f in report.failures
            ],
        },
    )
    return report


def probe_fio_cluster(
    inventory: Inventory,
    profile: Profile,
    out_dir: Path,
    *,
    node: Optional[str] = None,
    target: Optional[str] = None,
    port: int = 8765,
    client: Optional[str] = None,
    accept_new_host_keys: bool = False,
    progress: Optional[Progress] = None,
) -> ProbeReport:
    """fio's client/server mode over every selected (node, target): ``fio --server`` on each node at
    its inventory address, ``fio --client`` from ``client`` (default: the first node); the result is
    the sum over hosts per job set, with each host's own figures. Targets sharing a node get
    consecutive ports (so do nodes that share an address)."""
    spec = profile.probes.fio
    pairs = select_targets(inventory, spec.targets, node=node, target=target)
    names = list(dict.fromkeys([*(n.name for n, _ in pairs), *([client] if client else [])]))
    if client is not None and client not in [n.name for n in inventory.nodes]:
        raise InputError(f"client node {client!r} is not in the inventory")
    executors = _executors(inventory, names, accept_new_host_keys)
    used: dict[str, int] = {}
    servers = []
    for n, t in pairs:
        offset = used.get(n.host, 0)  # nodes sharing an address (or one node, several targets)
        used[n.host] = offset + 1
        servers.append(ServerSpec(executors[n.name], t, n.host, port + offset))
    report = ProbeReport("fio-cluster", out_dir)

    def say(text: str) -> None:
        if progress is not None:
            progress.status(text, force=True)

    try:
        result = run_fio_client_server(
            executors[client or pairs[0][0].name], servers, spec, out_dir, progress=say
        )
        report.results.append(result)
    except (ProbeError, ProbeRefused, RemoteError, InputError) as exc:
        report.failures.append(
            ProbeFailure("+".join(n.name for n, _ in pairs), "+".join(t.name for _, t in pairs), exc)
        )
    finally:
        _close(executors)
    report.results_path = _write_results(
        out_dir,
        {
            "schema": RESULTS_SCHEMA,
            "kind": "fio-cluster",
            "profile": profile.name,
            "cluster": inventory.cluster,
            "spec": spec.model_dump(mode="json"),
            "servers": [
                {"node": s.executor.node, "target": s.target.name, "address": s.address, "port": s.port}
                for s in servers
            ],
            "results": [r.to_json(relative_to=out_dir) for r in report.results],
            "failures": [
                {"node": f.node, "target": f.target, "error": str(f.error)} for f in report.failures
            ],
        },
    )
    return report


def _run_each(
    pairs: list[tuple[str, Union[str, StorageTarget]]],
    executors: dict[str, Executor],
    call: Any,
    report: ProbeReport,
    progress: Optional[Progress],
) -> None:
    for node_name, where in pairs:
        label = where.name if isinstance(where, StorageTarget) else where
        if progress is not None:
            progress.status(f"{node_name}/{label}: running", force=True)
        try:
            report.results.append(call(executors[node_name], where))
        except (ProbeError, ProbeRefused, RemoteError, InputError) as exc:
            report.failures.append(ProbeFailure(node_name, label, exc))
        if progress is not None:
            progress.update(1, f"{node_name}/{label}")


def probe_single(
    name: str,
    inventory: Inventory,
    profile: Profile,
    out_dir: Path,
    *,
    node: Optional[str] = None,
    target: Optional[str] = None,
    accept_new_host_keys: bool = False,
    progress: Optional[Progress] = None,
) -> ProbeReport:
    """A registered one-node probe (checkpoint, modelload, ...) on every place it selects, each run
    through ``registry.run_probe_on`` (the runner the gate pipelines use too)."""
    kind = get_probe(name)
    spec = kind.spec_of(profile)
    if spec is None:
        raise InputError(f"profile {profile.name!r} has no probes.{name} section")
    if kind.select is None:
        raise InputError(f"probe {name!r} runs over several targets at once; use its own entry point")
    places = kind.select(spec, inventory, profile, node, target)

    def call(ex: Executor, where: Union[str, StorageTarget]) -> Any:
        if isinstance(where, StorageTarget):
            where = kind.where_on(spec, where)
        python = str(inventory.setting(inventory.node(ex.node), "python"))
        said = None if progress is None else (lambda line: progress.status(f"{ex.node}: {line}", force=True))
        return run_probe_on(kind, ex, where, spec, out_dir, python=python, on_round=said)

    return _run_probe(name, inventory, profile, spec.model_dump(mode="json"), places, call, out_dir,
                      accept_new_host_keys=accept_new_host_keys, progress=progress)


def probe_checkpoint(inventory: Inventory, profile: Profile, out_dir: Path, **kw: Any) -> ProbeReport:
    return probe_single("checkpoint", inventory, profile, out_dir, **kw)


def probe_modelload(inventory: Inventory, profile: Profile, out_dir: Path, **kw: Any) -> ProbeReport:
    return probe_single("modelload", inventory, profile, out_dir, **kw)


def _run_probe(kind: str, inventory: Inventory, profile: Profile, spec: dict[str, object],
               pairs: Sequence[tuple[str, Any]], call: Callable[[Executor, Any], Any], out_dir: Path, *,
               accept_new_host_keys: bool, progress: Optional[Progress]) -> ProbeReport:
    """Run ``call`` for every (node, target) pair and write ``results.json`` with every result and
    failure (one node failing never hides the others)."""
    executors = _executors(inventory, list(dict.fromkeys(n for n, _ in pairs)), accept_new_host_keys)
    report = ProbeReport(kind, out_dir)
    try:
        _run_each(list(pairs), executors, call, report, progress)
    finally:
        _close(executors)
    report.results_path = _write_results(
        out_dir,
        {
            "schema": RESULTS_SCHEMA,
            "kind": kind,
            "profile": profile.name,
            "cluster": inventory.cluster,
            "spec": spec,
            "results": [_rel(r.to_json(), out_dir) for r in report.results],
            "failures": [
                {"node": f.node, "target": f.target, "error": str(f.error)} for f in report.failures
            ],
        },
    )
    return report


def _rel(data: dict[str, object], base: Path) -> dict[str, object]:
    ev = data.get("evidence")
    if isinstance(ev, str):
        try:
            data["evidence"] = str(Path(ev).resolve().relative_to(base.resolve()))
        except ValueError:
            pass
    return data
