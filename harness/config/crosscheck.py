"""Checks that span files: an arm's storage target must exist in the inventory, jump hosts must
exist and not loop, a gate's metric must be one that kvgate measures, overrides must name real
checks."""

from __future__ import annotations

import re
from collections.abc import Sequence

from harness.catalog import METRICS, metric_info
from harness.config.gatespec import GateSpec
from harness.config.inventory import Inventory
from harness.config.planrules import profile_problems
from harness.config.profile import Profile
from harness.config.yamlsource import YamlDocument
from harness.errors import ConfigError
from harness.units import UnitParseError, parse_quantity


def _err(doc: YamlDocument | None, loc: tuple[object, ...], msg: str, path: str) -> ConfigError:
    line, col = doc.locate(loc) if doc else (None, None)  # type: ignore[arg-type]
    from harness.config.yamlsource import dotted_path

    return ConfigError(msg, path=path, line=line, column=col, field=dotted_path(loc) or None)  # type: ignore[arg-type]


def check_controller_files(inv: Inventory, doc: YamlDocument | None = None,
                           path: str = "<inventory>") -> list[ConfigError]:
    """Files the controller itself reads must exist: an SSH node's identity_file (else every
    connection would fail later, as "unreachable")."""
    import os

    errors: list[ConfigError] = []
    if inv.defaults.identity_file and not os.path.isfile(os.path.expanduser(inv.defaults.identity_file)):
        used = any(n.identity_file is None and n.connection == "ssh" for n in inv.nodes)
        if used:
            errors.append(_err(doc, ("defaults", "identity_file"),
                               f"identity_file {inv.defaults.identity_file!r} does not exist on this machine "
                               "(a private key file; leave it out to use your SSH agent)", path))
    for i, node in enumerate(inv.nodes):
        key = node.identity_file
        if key and node.connection == "ssh" and not os.path.isfile(os.path.expanduser(key)):
            errors.append(_err(doc, ("nodes", i, "identity_file"),
                               f"node {node.name}: identity_file {key!r} does not exist on this machine "
                               "(a private key file; leave it out to use your SSH agent)", path))
    return errors


def check_inventory(inv: Inventory, doc: YamlDocument | None = None, path: str = "<inventory>") -> list[ConfigError]:
    """Jump hosts exist and do not form a cycle."""
    errors: list[ConfigError] = []
    names = {n.name for n in inv.nodes}
    for i, node in enumerate(inv.nodes):
        if node.jump is not None and node.jump not in names:
            errors.append(_err(doc, ("nodes", i, "jump"),
                               f"jump host {node.jump!r} is not a node of this inventory; known: "
                               f"{', '.join(sorted(names))}", path))
        if node.connection in ("local", "ray") and node.jump is not None:
            errors.append(_err(doc, ("nodes", i, "jump"), f"a {node.connection} node cannot have a jump host",
                               path))
    errors += _check_ray(inv, doc, path)
    by_name = {n.name: n for n in inv.nodes}
    reported: set[frozenset[str]] = set()
    for i, node in enumerate(inv.nodes):
        chain = [node.name]
        cur = node
        while cur.jump is not None and cur.jump in by_name:
            if cur.jump in chain:
                chain.append(cur.jump)
                cycle = frozenset(chain[chain.index(cur.jump):])
                if cycle in reported:
                    break
                reported.add(cycle)
                errors.append(_err(doc, ("nodes", i, "jump"),
                                   f"jump hosts form a cycle: {' -> '.join(chain)}", path))
                break
            chain.append(cur.jump)
            cur = by_name[cur.jump]
    return errors


def _check_ray(inv: Inventory, doc: YamlDocument | None, path: str) -> list[ConfigError]:
    """``connection: ray`` nodes: the cluster's address is known, one namespace and address for all
    (one controller talks to one cluster), no two nodes claim the same Ray node, and Ray settings
    only where Ray is used."""
    errors: list[ConfigError] = []
    claimed: dict[tuple[str, str], str] = {}
    clusters: set[tuple[str, str]] = set()
    for i, node in enumerate(inv.nodes):
        if node.connection != "ray":
            if node.ray is not None:
                errors.append(_err(doc, ("nodes", i, "ray"), f"node {node.name}: `ray` is set but its "
                                   f"connection is {node.connection} (set connection: ray)", path))
            continue
        ray = inv.ray_settings(node)
        if ray.address is None:
            errors.append(_err(doc, ("nodes", i, "connection"), f"node {node.name}: connection is ray but "
                               "no cluster address is given (set defaults.ray.address, e.g. 10.0.0.1:6379)",
                               path))
            continue
        clusters.add((ray.address, ray.namespace or "kvgate"))
        how, value = ray.mapping()
        other = claimed.setdefault((how, value), node.name)
        if other != node.name:
            errors.append(_err(doc, ("nodes", i, "ray"), f"nodes {other} and {node.name} both claim the Ray "
                               f"node with {how} {value}: each inventory node needs its own Ray node", path))
    if len(clusters) > 1:
        errors.append(_err(doc, ("defaults", "ray"), "connection: ray nodes name "
                           f"{len(clusters)} different clusters or namespaces "
                           f"({', '.join(sorted(a + '/' + n for a, n in clusters))}): one inventory, one "
                           "Ray cluster", path))
    return errors


def check_gate(gate: GateSpec, doc: YamlDocument | None = None, path: str = "<gate>") -> list[ConfigError]:
    """Every check reads a metric that some pipeline produces."""
    errors: list[ConfigError] = []
    for i, check in enumerate(gate.checks):
        info = metric_info(check.metric)
        if info is None:
            close = [m for m in METRICS if m.split(".")[0] == check.metric.split(".")[0]]
            hint = f"; metrics under {check.metric.split('.')[0]!r}: {', '.join(close)}" if close else \
                f"; known roots: {', '.join(sorted({m.split('.')[0] for m in METRICS}))}"
            errors.append(_err(doc, ("checks", i, "metric"),
                               f"metric {check.metric!r} is not measured by any kvgate pipeline{hint}", path))
        elif check.statistic.kind == "interval" and not info.sampled:
            errors.append(_err(doc, ("checks", i, "statistic", "kind"),
                               f"metric {check.metric!r} is a single figure without samples; use statistic "
                               "kind 'point'", path))
    return errors


def check_profile(profile: Profile, inventories: Sequence[Inventory], gates: Sequence[GateSpec],
                  doc: YamlDocument | None = None, path: str = "<profile>") -> list[ConfigError]:
    """Arms name storage targets the inventory has; overrides name real checks with fitting units."""
    errors: list[ConfigError] = []
    # With several inventories, the profile must fit at least one of them (it is meant for one
    # cluster); the problems reported are those against the best-fitting inventory.
    best: list[ConfigError] | None = None
    for inv in inventories:
        found = _target_problems(profile, inv, doc, path) + plan_rule_errors(profile, [inv], doc, path)
        if best is None or len(found) < len(best):
            best = found
    errors.extend(best if best is not None else plan_rule_errors(profile, [], doc, path))
    by_id = {g.id: g for g in gates}
    for i, ov in enumerate(profile.overrides):
        gate = by_id.get(ov.gate)
        if gate is None:
            continue
        try:
            check = gate.check(ov.check)
        except KeyError as exc:
            errors.append(_err(doc, ("overrides", i, "check"), str(exc.args[0]), path))
            continue
        try:
            parse_quantity(ov.threshold, check.unit_kind)
        except UnitParseError as exc:
            errors.append(_err(doc, ("overrides", i, "threshold"), str(exc), path))
    return errors


def server_platforms(inventories: Sequence[Inventory]) -> list[str]:
    return sorted({str(n.platform) for inv in inventories for n in inv.nodes if "server" in n.roles})


def plan_rule_errors(profile: Profile, inventories: Sequence[Inventory], doc: YamlDocument | None = None,
                     path: str = "<profile>") -> list[ConfigError]:
    """The refusals of ``harness.config.planrules`` for the inventories' server platforms, located."""
    return [_err(doc, loc, msg, path) for loc, msg in profile_problems(profile, server_platforms(inventories))]


def _target_problems(profile: Profile, inv: Inventory, doc: YamlDocument | None, path: str) -> list[ConfigError]:
    errors: list[ConfigError] = []
    targets = {t.name for n in inv.nodes for t in n.storage}
    for i, arm in enumerate(profile.arms):
        if arm.storage is not None and arm.storage not in targets:
            errors.append(_err(doc, ("arms", i, "storage"),
                               f"arm {arm.name!r} names storage target {arm.storage!r}, which inventory "
                               f"{inv.cluster!r} does not have; its targets: {', '.join(sorted(targets)) or 'none'}",
                               path))
    for j, name in enumerate(profile.probes.fio.targets):
        if name not in targets:
            errors.append(_err(doc, ("probes", "fio", "targets", j),
                               f"fio target {name!r} is not in inventory {inv.cluster!r}", path))
    return errors


_PLACEHOLDER_HOST = re.compile(r"^HOST\d*$", re.IGNORECASE)


def _strings(data: object, loc: tuple[object, ...] = ()) -> list[tuple[tuple[object, ...], str]]:
    if isinstance(data, dict):
        return [s for k, v in data.items() for s in _strings(v, (*loc, k))]
    if isinstance(data, list):
        return [s for i, v in enumerate(data) for s in _strings(v, (*loc, i))]
    return [(loc, data)] if isinstance(data, str) else []


def placeholder_problems(doc: YamlDocument, path: str) -> list[ConfigError]:
    """Values ``kvgate init`` (or the README) writes where only the user knows the answer, left as
    they are: a host named HOST or HOST1, a path or name with YOUR- in it (/models/YOUR-MODEL)."""
    errors: list[ConfigError] = []
    for loc, value in _strings(doc.data):
        host = bool(loc) and loc[-1] == "host" and _PLACEHOLDER_HOST.match(value)
        if host or "YOUR-" in value:
            what = loc[-1] if loc and isinstance(loc[-1], str) else "value"
            errors.append(_err(doc, loc, f"{value!r} is a placeholder, not yet edited: put the real {what} "
                               "here (see the TODO beside it)", path))
    return errors
