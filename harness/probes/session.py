"""Probes over an inventory: pick the (node, target) pairs a profile asks for, run the probes with
one executor per node, write ``results.json`` next to the raw evidence, and shape the rows of the
on-screen tables. What ``kvgate probe`` and the gate pipelines call.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from harness.config.inventory import Inventory, Node, StorageTarget
from harness.config.profile import Profile
from harness.errors import InfraError, InputError
from harness.probes.checkpoint import CheckpointResult, run_checkpoint_probe
from harness.probes.errors import ProbeError, ProbeRefused
from harness.probes.fio_parse import (
    DIRECTIONS,
    FioOutput,
    GroupSummary,
    parse_fio_file,
    summarise_cluster,
    summarise_per_node,
)
from harness.probes.fio_run import (
    FioProbeResult,
    ProbeFailure,
    ServerSpec,
    run_fio_client_server,
    run_fio_probes,
)
from harness.probes.modelload import ModelLoadResult, run_modelload_probe
from harness.progress import Progress
from harness.remote.base import Executor, RemoteError
from harness.remote.connect import executor_for

RESULTS_SCHEMA = "kvgate.probes/1"
FIO_HEADERS = (
    "node",
    "target",
    "job set",
    "read GB/s",
    "write GB/s",
    "read IOPS",
    "write IOPS",
    "p99 clat ms",
    "steady",
    "errors",
)
PARSE_HEADERS = (
    "file",
    "host",
    "group",
    "read GB/s",
    "write GB/s",
    "read IOPS",
    "write IOPS",
    "p99 clat ms",
    "errors",
)


def select_targets(
    inventory: Inventory,
    wanted: Sequence[str] = (),
    *,
    node: Optional[str] = None,
    target: Optional[str] = None,
) -> list[tuple[Node, StorageTarget]]:
    """(node, target) pairs: the targets named in ``wanted`` (all when empty), narrowed to ``node``
    and ``target``. A name that matches nothing is an InputError listing what exists."""
    if node is not None:
        try:
            nodes = [inventory.node(node)]
        except KeyError as exc:
            raise InputError(str(exc.args[0])) from None
    else:
        nodes = list(inventory.nodes)
    names = [target] if target else list(wanted)
    pairs = [(n, t) for n in nodes for t in n.storage if not names or t.name in names]
    known = sorted({t.name for n in nodes for t in n.storage})
    missing = [x for x in names if not any(t.name == x for _, t in pairs)]
    if missing or not pairs:
        where = f"node {node}" if node else "the inventory"
        raise InputError(
            f"storage target(s) {', '.join(missing) or '(any)'} not found on {where}; "
            f"targets: {', '.join(known) or 'none'}"
        )
    return pairs


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


def _executors(inventory: Inventory, names: Sequence[str], accept_new_host_keys: bool) -> dict[str, Executor]:
    return {n: executor_for(inventory, n, accept_new_host_keys=accept_new_host_keys) for n in names}


def _close(executors: dict[str, Executor]) -> None:
    for ex in executors.values():
        try:
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


def _storage_for(profile: Profile, explicit: Optional[str], configured: Optional[str]) -> str:
    name = explicit or configured
    if name:
        return name
    try:
        storage = profile.arm(profile.candidate).storage
    except KeyError:
        storage = None
    if not storage:
        raise InputError(
            "no storage target given: pass --target, or set the probe's target in the profile, "
            "or give the candidate arm a 'storage'"
        )
    return storage


def probe_checkpoint(
    inventory: Inventory,
    profile: Profile,
    out_dir: Path,
    *,
    node: Optional[str] = None,
    target: Optional[str] = None,
    accept_new_host_keys: bool = False,
    progress: Optional[Progress] = None,
) -> ProbeReport:
    spec = profile.probes.checkpoint
    if spec is None:
        raise InputError(f"profile {profile.name!r} has no probes.checkpoint section")
    name = _storage_for(profile, target, spec.target)
    pairs = [(n.name, t) for n, t in select_targets(inventory, [name], node=node)]
    return _run_probe("checkpoint", inventory, profile, spec.model_dump(mode="json"), pairs,
                      lambda ex, t: run_checkpoint_probe(ex, t, spec, out_dir), out_dir,
                      accept_new_host_keys=accept_new_host_keys, progress=progress)


def probe_modelload(
    inventory: Inventory,
    profile: Profile,
    out_dir: Path,
    *,
    node: Optional[str] = None,
    target: Optional[str] = None,
    accept_new_host_keys: bool = False,
    progress: Optional[Progress] = None,
) -> ProbeReport:
    spec = profile.probes.modelload
    if spec is None:
        raise InputError(f"profile {profile.name!r} has no probes.modelload section")
    pairs_any: list[tuple[str, Union[str, StorageTarget]]]
    if spec.synthetic_size is not None or target or spec.targets:
        names = [target] if target else (spec.targets or [_storage_for(profile, None, None)])
        pairs_any = [(n.name, t) for n, t in select_targets(inventory, names, node=node)]
    elif spec.directory:
        nodes = [inventory.node(node)] if node else list(inventory.nodes)
        pairs_any = [(n.name, spec.directory) for n in nodes]
    else:
        raise InputError("probes.modelload needs 'directory', 'targets' or 'synthetic_size'")

    def call(ex: Executor, where: Union[str, StorageTarget]) -> ModelLoadResult:
        if isinstance(where, StorageTarget) and spec.synthetic_size is None:
            # weights copied onto this target: the profile's directory is relative to the target path
            rel = (spec.directory or "").lstrip("/")
            return run_modelload_probe(
                ex, f"{where.path.rstrip('/')}/{rel}" if rel else where.path, spec, out_dir
            )
        return run_modelload_probe(ex, where, spec, out_dir)

    return _run_probe("modelload", inventory, profile, spec.model_dump(mode="json"), pairs_any, call, out_dir,
                      accept_new_host_keys=accept_new_host_keys, progress=progress)


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


# --------------------------------------------------------------------------------------------
# Table rows


def _gb(v: Optional[float]) -> str:
    return "-" if v is None else f"{v / 1e9:.3f}"


def _iops(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _ms(v: Optional[float]) -> str:
    return "-" if v is None else f"{v / 1e6:.3f}"


def fio_rows(results: Sequence[FioProbeResult]) -> list[list[object]]:
    rows: list[list[object]] = []
    for r in results:
        for name, js in r.job_sets.items():
            p99 = None
            for d in (js.read, js.write):
                if d is not None and d.percentiles_ns.get(99.0) is not None:
                    p99 = max(p99 or 0.0, d.percentiles_ns[99.0])
            steady = "-" if js.steady_state is None else ("yes" if js.steady_state.steady else "no")
            rows.append(
                [
                    r.node,
                    r.target,
                    name,
                    _gb(js.read_bw_bytes),
                    _gb(js.write_bw_bytes),
                    _iops(js.read_iops),
                    _iops(js.write_iops),
                    _ms(p99),
                    steady,
                    js.errors,
                ]
            )
    return rows


def fio_cluster_rows(results: Sequence[FioProbeResult]) -> list[list[object]]:
    """Each host's figures, then the sum over hosts (the cluster's aggregate) per job set."""
    rows: list[list[object]] = []
    for r in results:
        for host, sets in r.per_host.items():
            per = FioProbeResult(
                node=host,
                target="",
                engine=r.engine,
                fio_version=r.fio_version,
                job_sets=sets,
                raw_output=r.raw_output,
                jobfile=r.jobfile,
                command=r.command,
            )
            rows.extend(fio_rows([per]))
        total = FioProbeResult(
            node=f"sum of {len(r.per_host)} hosts",
            target=r.target,
            engine=r.engine,
            fio_version=r.fio_version,
            job_sets=r.job_sets,
            raw_output=r.raw_output,
            jobfile=r.jobfile,
            command=r.command,
        )
        rows.extend(fio_rows([total]))
    return rows


def checkpoint_rows(results: Sequence[CheckpointResult]) -> tuple[tuple[str, ...], list[list[object]]]:
    headers = (
        "node",
        "target",
        "size GB",
        "files",
        "writers",
        "time s",
        "write GB/s",
        "read-back GB/s",
        "read-back",
    )
    rows: list[list[object]] = [
        [
            r.node,
            r.target,
            f"{r.total_bytes / 1e9:.3f}",
            r.files,
            r.writers,
            f"{r.total_s:.3f}",
            _gb(r.write_bw_bytes),
            _gb(r.read_back_bw_bytes),
            r.read_back.how if r.read_back else "-",
        ]
        for r in results
    ]
    return headers, rows


def modelload_rows(results: Sequence[ModelLoadResult]) -> tuple[tuple[str, ...], list[list[object]]]:
    headers = ("node", "source", "files", "readers", "size GB", "time s", "read GB/s", "cold read")
    rows: list[list[object]] = [
        [
            r.node,
            r.source,
            r.files,
            r.readers,
            f"{r.total_bytes / 1e9:.3f}",
            f"{r.total_s:.3f}",
            _gb(r.read_bw_bytes),
            ("MAY INCLUDE CACHED READS: " if r.may_include_cached else "") + r.how,
        ]
        for r in results
    ]
    return headers, rows


def parse_saved(paths: Sequence[str]) -> list[FioOutput]:
    """Parse saved fio output files; the first bad file stops with its FioParseError."""
    return [parse_fio_file(p) for p in paths]


def _p99(g: GroupSummary) -> Optional[float]:
    p99 = None
    for ddir in DIRECTIONS:
        d = g.direction(ddir)
        if d is not None and d.percentiles_ns.get(99.0) is not None:
            p99 = max(p99 or 0.0, d.percentiles_ns[99.0])
    return p99


def _group_row(file: str, host: str, g: GroupSummary) -> list[object]:
    return [
        file,
        host,
        g.name,
        _gb(g.read.bw_bytes if g.read else None),
        _gb(g.write.bw_bytes if g.write else None),
        _iops(g.read.iops if g.read else None),
        _iops(g.write.iops if g.write else None),
        _ms(_p99(g)),
        g.errors,
    ]


def parsed_rows(outputs: Sequence[FioOutput]) -> list[list[object]]:
    rows: list[list[object]] = []
    for out in outputs:
        name = Path(out.source).name
        per_node = summarise_per_node(out.final)
        for host, groups in per_node.items():
            rows.extend(_group_row(name, host, g) for g in groups)
        if len(per_node) > 1:  # client/server: the sum over hosts is the cluster's aggregate bandwidth
            rows.extend(
                _group_row(name, f"sum of {len(per_node)} hosts", g) for g in summarise_cluster([out.final])
            )
    return rows


def parsed_json(outputs: Sequence[FioOutput]) -> list[dict[str, object]]:
    data: list[dict[str, object]] = []
    for out in outputs:
        doc = out.final
        data.append(
            {
                "file": out.source,
                "fio_version": doc.fio_version,
                "documents": len(out.documents),
                "client_server": doc.client_server,
                "per_node": {h: [g.to_json() for g in gs] for h, gs in summarise_per_node(doc).items()},
                "cluster": [g.to_json() for g in summarise_cluster([doc])],
            }
        )
    return data
