"""The one list of probes. A probe is one ``ProbeKind``: where its settings live in the profile, how
it runs on one node (the single runner both ``kvgate probe`` and the gate pipelines call), the
leaves it adds to the measured results, the ``measurements`` section its chart reads, and its CLI
table. Adding a probe: a module in ``probes/`` with its runner and result, one ``ProbeKind`` below,
its metrics in ``harness/catalog.py``, its chart layout in ``report/charts.py``'s docstring (see
``docs/ARCHITECTURE.md``, "Where to add things").

fio is registered too (spec, leaves, chart, help) but runs over many targets at once through
``fio_run`` (``session.probe_fio`` and ``pipelines.shared.probesteps.fio_step``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from harness.config.inventory import Inventory, StorageTarget
from harness.config.profile import Profile
from harness.errors import InputError
from harness.probes.checkpoint import CheckpointResult, run_checkpoint_probe
from harness.probes.measured import Leaf, checkpoint_leaf, fio_leaf, modelload_leaf
from harness.probes.modelload import ModelLoadResult, run_modelload_probe
from harness.probes.selection import select_targets, storage_for
from harness.probes.tables import checkpoint_rows, modelload_rows
from harness.remote.base import Executor

Where = Union[str, StorageTarget]
Place = tuple[str, Where]


@dataclass(frozen=True)
class ProbeKind:
    name: str
    help: str  # one line for `kvgate probe --help`
    description: str  # the subcommand's description
    spec_of: Callable[[Profile], Any]  # the profile section (None: not asked for)
    # runs the probe once on one node: (executor, where, spec, out_dir, python) -> result
    run: Optional[Callable[..., Any]]  # (executor, where, spec, out_dir, python[, on_round]) -> result
    # where it runs on a storage target the pipeline or the CLI picked
    where_on: Callable[[Any, StorageTarget], Where]
    metric: str  # the leaf under ``<probe>.`` in the measured results (catalog)
    leaf: Callable[[Any, Optional[Path]], Optional[Leaf]]
    chart_key: str  # the ``measurements`` section the report reads (layout in report/charts.py)
    chart: Callable[[Any], dict[str, Any]]  # that section's entry for one result
    rows: Optional[Callable[[Sequence[Any]], tuple[tuple[str, ...], list[list[object]]]]] = None
    # in a gate: does it run on the arm's storage target of this name
    runs_on: Callable[[Any, str], bool] = lambda spec, target: True
    # ``kvgate probe <name>``: (spec, inventory, profile, --node, --target) -> [(node name, where)]
    select: Optional[Callable[[Any, Inventory, Profile, Optional[str], Optional[str]], list[Place]]] = None
    reports_rounds: bool = False  # its run takes an ``on_round`` line callback as a sixth argument


def _checkpoint_run(ex: Executor, where: Where, spec: Any, out: Path, python: str,
                    on_round: Optional[Callable[[str], None]] = None) -> CheckpointResult:
    if not isinstance(where, StorageTarget):
        raise InputError("the checkpoint probe writes on a storage target, not a directory")
    return run_checkpoint_probe(ex, where, spec, out, python=python, on_round=on_round)


def _modelload_run(ex: Executor, where: Where, spec: Any, out: Path, python: str,
                   on_round: Optional[Callable[[str], None]] = None) -> ModelLoadResult:
    return run_modelload_probe(ex, where, spec, out, python=python, on_round=on_round)


def modelload_where(spec: Any, target: StorageTarget) -> Where:
    """Synthetic shards go on the target; an absolute directory is read where it is; a relative one
    is a copy of the weights under the target's path."""
    if spec.synthetic_size is not None:
        return target
    directory = spec.directory or ""
    if directory.startswith("/"):
        return directory
    return f"{target.path.rstrip('/')}/{directory}" if directory else target.path


def _checkpoint_select(spec: Any, inventory: Inventory, profile: Profile, node: Optional[str],
                       target: Optional[str]) -> list[Place]:
    name = storage_for(profile, target, spec.target)
    return [(n.name, t) for n, t in select_targets(inventory, [name], node=node)]


def _modelload_select(spec: Any, inventory: Inventory, profile: Profile, node: Optional[str],
                      target: Optional[str]) -> list[Place]:
    if spec.synthetic_size is not None or target or spec.targets:
        names = [target] if target else (spec.targets or [storage_for(profile, None, None)])
        return [(n.name, t) for n, t in select_targets(inventory, names, node=node)]
    if spec.directory:
        nodes = [inventory.node(node)] if node else list(inventory.nodes)
        return [(n.name, spec.directory) for n in nodes]
    raise InputError("probes.modelload needs 'directory', 'targets' or 'synthetic_size'")


def _fio_leaf(res: Any, base: Optional[Path]) -> Optional[Leaf]:
    return fio_leaf(res, "seq-read", "read", base)


PROBES: dict[str, ProbeKind] = {
    p.name: p
    for p in (
        ProbeKind(
            name="fio",
            help="fio job sets on every storage target",
            description="Run the profile's fio job sets (seq-read, seq-write, rand-read, mixed) on each "
            "node's storage targets, nodes in parallel; or, with --parse, parse saved fio JSON/json+ files "
            "(any fio 2.x-3.4x, client/server too) and print the same table.",
            spec_of=lambda profile: profile.probes.fio,
            run=None,
            where_on=lambda spec, target: target,
            metric="seq_read_bw",
            leaf=_fio_leaf,
            chart_key="fio",
            chart=lambda res: {res.node: {res.target: {"seq_read_bw": res.job_sets["seq-read"].read_bw_bytes
                                                       if "seq-read" in res.job_sets else None}}},
        ),
        ProbeKind(
            name="checkpoint",
            help="checkpoint write: N bytes as M files, parallel writers, fsync",
            description="Write a checkpoint snapshot (probes.checkpoint) on a storage target "
            "of each node, fsync every file and the directory; optional cold read-back.",
            spec_of=lambda profile: profile.probes.checkpoint,
            run=_checkpoint_run,
            where_on=lambda spec, target: target,
            metric="write_bw",
            leaf=checkpoint_leaf,
            chart_key="checkpoint",
            chart=lambda res: {"write_bw": res.write_bw_bytes, "bytes": res.total_bytes, "seconds": res.total_s},
            rows=checkpoint_rows,
            select=_checkpoint_select,
            runs_on=lambda spec, target: spec.target in (None, target),
            reports_rounds=True,
        ),
        ProbeKind(
            name="modelload",
            help="model load: cold parallel read of a weights directory",
            description="Read a weights directory (or synthetic shards) with parallel readers "
            "after dropping the page cache (root) or with O_DIRECT; results that may include "
            "cached reads are marked.",
            spec_of=lambda profile: profile.probes.modelload,
            run=_modelload_run,
            where_on=modelload_where,
            metric="read_bw",
            leaf=modelload_leaf,
            chart_key="modelload",
            # a read that may include cached data is no storage figure: not charted
            chart=lambda res: {"read_bw": res.read_bw_bytes if not res.may_include_cached else None,
                               "bytes": res.total_bytes, "seconds": res.total_s},
            rows=modelload_rows,
            select=_modelload_select,
            runs_on=lambda spec, target: not spec.targets or target in spec.targets,
            reports_rounds=True,
        ),
    )
}


def probe_names() -> tuple[str, ...]:
    return tuple(PROBES)


def get_probe(name: str) -> ProbeKind:
    try:
        return PROBES[name]
    except KeyError:
        raise InputError(f"unknown probe {name!r}; known: {', '.join(PROBES)}") from None


def register_probe(kind: ProbeKind) -> None:
    """Add a probe at run time (tests, plug-ins); a name is registered once."""
    if kind.name in PROBES:
        raise ValueError(f"probe {kind.name!r} is already registered")
    PROBES[kind.name] = kind


def unregister_probe(name: str) -> None:
    PROBES.pop(name, None)


def run_probe_on(kind: ProbeKind, executor: Executor, where: Where, spec: Any, out_dir: Path, *,
                 python: str = "python3", on_round: Optional[Callable[[str], None]] = None) -> Any:
    """The one runner: ``kind`` once on one node (the CLI's session and the gate pipelines call it);
    ``on_round`` hears each round of a probe measured in rounds (``reports_rounds``)."""
    if kind.run is None:
        raise InputError(f"probe {kind.name!r} runs over several targets at once; use its own entry point")
    if kind.reports_rounds and on_round is not None:
        return kind.run(executor, where, spec, out_dir, python, on_round)
    return kind.run(executor, where, spec, out_dir, python)
