"""Page one of a gate report, the sheet the parties sign (issue 53), as rows of text: the verdict
and one sentence of why, the headline (each blocker's figure: baseline -> candidate where the
check compares them, its interval and threshold), the system under test per role (``declared``
from the inventory, ``measured`` from the nodes' G1 facts, as ``result.json`` recorded them) and
the workload. The templates lay these out; nothing here is computed from anything but the result."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from harness.report.i18n import N_, _t
from harness.report.view import CheckRow, fmt
from harness.store.schema import GateResult, Verdict

DECLARED, MEASURED, RECORDED = N_("declared"), N_("measured"), N_("recorded")
_WHY_CHARS = 150
_MODES = {"closed": N_("closed loop"), "open": N_("open loop")}


def verdict_why(rows: Sequence[CheckRow], power_table: bool = False) -> str:
    """One sentence: every blocker passed (how many), or the first blocker that did not, with its
    reason, and how many more did not; when a blocker is INCONCLUSIVE, what that means and (with
    a power table after the checks) where the repetitions that would decide it are."""
    blockers = [r for r in rows if r.severity == "blocker" and r.verdict is not Verdict.NOT_APPLICABLE]
    bad = [r for r in blockers if not r.passed]
    if not bad:
        return _t("Every blocker check passed (%(n)s of %(n)s).") % {"n": len(blockers)}
    first = bad[0]
    reason = first.reason if len(first.reason) <= _WHY_CHARS else first.reason[:_WHY_CHARS - 1] + "\u2026"
    text = _t("%(check)s is %(verdict)s: %(reason)s.") % {"check": first.id, "verdict": first.verdict.value,
                                                         "reason": reason.rstrip(".") or "-"}
    if len(bad) > 1:
        text += " " + _t("%(n)s more blocker check(s) not passed.") % {"n": len(bad) - 1}
    if any(r.verdict is Verdict.INCONCLUSIVE for r in bad):
        text += " " + (_t("INCONCLUSIVE: the repetitions run could not tell PASS from FAIL; the power table "
                          "after the checks gives the repetitions that would decide it 8 times in 10.")
                       if power_table else _t("INCONCLUSIVE: the repetitions run could not tell PASS from FAIL."))
    return text


def headline(rows: Sequence[CheckRow]) -> list[CheckRow]:
    """The blocker checks, each with its figure, interval and threshold (NOT_APPLICABLE ones have
    no figure: they are listed in the checks table)."""
    return [r for r in rows if r.severity == "blocker" and r.verdict is not Verdict.NOT_APPLICABLE]


@dataclass
class Item:
    label: str
    value: str
    source: str = ""  # DECLARED, MEASURED, RECORDED or "" (a count, a name)


@dataclass
class RoleGroup:
    roles: str
    nodes: list[str]
    items: list[Item] = field(default_factory=list)


def _nodes(inv: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    nodes = inv.get("nodes")
    if isinstance(nodes, Mapping):
        return [v for v in nodes.values() if isinstance(v, Mapping)]
    return [n for n in nodes or [] if isinstance(n, Mapping)] if isinstance(nodes, (list, tuple)) else []


def _distinct(values: Sequence[Any]) -> Optional[str]:
    seen: list[str] = []
    for v in values:
        if v not in (None, "", [], {}):
            text = ", ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
            if text not in seen:
                seen.append(text)
    return "; ".join(seen) or None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _declared_accelerators(node: Mapping[str, Any]) -> Optional[str]:
    acc = node.get("accelerators")
    if isinstance(acc, Mapping) and acc.get("model"):
        return f"{acc['model']} x {acc.get('count', '?')}"
    return None


def _hardware(nodes: Sequence[Mapping[str, Any]]) -> list[Item]:
    measured: list[Mapping[str, Any]] = [_mapping(n.get("measured")) for n in nodes]
    items: list[Item] = []
    pairs = ((N_("Accelerators"), "accelerators"), (N_("CPU"), "cpu"), (N_("Kernel"), "kernel"), (N_("OS"), "os"))
    for label, key in pairs:
        if key == "accelerators" and (text := _distinct([_declared_accelerators(n) for n in nodes])):
            items.append(Item(label, text, DECLARED))
        if text := _distinct([m.get(key) for m in measured]):
            items.append(Item(label, text, MEASURED))
        if key == "accelerators" and not _distinct([m.get(key) for m in measured]) and \
                not _distinct([_declared_accelerators(n) for n in nodes]):
            items.append(Item(label, _t("none declared, none collected"), ""))
    if text := _distinct([fmt(float(m["memory_bytes"]), "bytes") for m in measured if m.get("memory_bytes")]):
        items.insert(2, Item(N_("Memory"), text, MEASURED))
    return items


def _software(nodes: Sequence[Mapping[str, Any]], prof: Mapping[str, Any]) -> list[Item]:
    """Every version the nodes' facts hold (driver, engine, LMCache, vllm-ascend, torch, tools: by
    the name G1 recorded it under), and the engine the profile ran."""
    items: list[Item] = []
    if prof.get("engine"):
        engine = str(prof["engine"])
        if prof.get("engine_version"):
            engine += f" ({prof['engine_version']})"
        items.append(Item(N_("Engine"), engine, RECORDED))
    if "engine_env" in prof:  # a result from before the record makes no claim either way
        env = prof["engine_env"]
        text = ", ".join(f"{k}={v}" for k, v in sorted(env.items())) if isinstance(env, Mapping) and env else None
        items.append(Item(N_("Engine environment"), text or _t("none declared"), DECLARED))
    names: list[str] = []
    for n in nodes:
        versions = n.get("versions")
        if isinstance(versions, Mapping):
            names += [str(k) for k in versions if str(k) not in names]
    kernels = {str(n["measured"].get("kernel")) for n in nodes if isinstance(n.get("measured"), Mapping)}
    for name in names:
        if name == "kernel" and kernels >= {str(n.get("versions", {}).get("kernel")) for n in nodes}:
            continue  # the measured kernel row says it
        text = _distinct([n.get("versions", {}).get(name) for n in nodes if isinstance(n.get("versions"), Mapping)])
        if text:
            items.append(Item(_t("%(name)s version") % {"name": name}, text, MEASURED))
    if prof.get("engine") == "sim":
        items.append(Item(N_("LMCache and engine"), _t("not used: the KV emulator stands in for vLLM + LMCache "
                                                       "(its own tiers, real storage I/O)"), ""))
    elif not any(n in names for n in ("lmcache", "LMCache")):
        items.append(Item(N_("LMCache version"), _t("not collected: the nodes' G1 facts hold no LMCache version"),
                          ""))
    return items


def _scalar(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v))
    return str(v)


def _target_items(nodes: Sequence[Mapping[str, Any]]) -> list[Item]:
    """Each storage target: what the inventory declares (every field it has: kind, device, drive
    models, RAID, capacity, a provisioned rate ...) and what G1 found (filesystem, device models,
    firmware), one row each."""
    items: list[Item] = []
    for n in nodes:
        declared = _mapping(n.get("declared"))
        measured = _mapping(n.get("measured")).get("storage")
        for t in declared.get("storage_targets") or []:
            if not isinstance(t, Mapping):
                continue
            name = str(t.get("name", "?"))
            label = _t("Storage %(name)s") % {"name": name}
            parts = [f"{k} {_scalar(v)}" for k, v in t.items() if k not in ("name", "path")]
            text = f"{', '.join(parts) or '-'} ({_t(DECLARED)})"
            found = (measured or {}).get(name) if isinstance(measured, Mapping) else None
            if isinstance(found, Mapping) and found:
                parts = [f"{k.removesuffix('_bytes')} {fmt(float(v), 'bytes') if k.endswith('_bytes') else _scalar(v)}"
                         for k, v in found.items()]
                text += f"; {', '.join(parts)} ({_t(MEASURED)})"
            items.append(Item(label, text))
    return items


def system_under_test(result: GateResult) -> list[RoleGroup]:
    """The nodes grouped by their roles, each group's hardware, software and storage."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for n in _nodes(result.inventory):
        roles = ", ".join(str(r) for r in n.get("roles") or []) or "-"
        groups.setdefault(roles, []).append(n)
    out = []
    for roles, nodes in groups.items():
        g = RoleGroup(roles=roles, nodes=[str(n.get("name", "?")) for n in nodes])
        g.items.append(Item(N_("Nodes"), f"{len(nodes)}: {', '.join(g.nodes)}"))
        platforms = _distinct([n.get("platform") for n in nodes])
        if platforms:
            g.items.append(Item(N_("Platform"), platforms, DECLARED))
        g.items += _hardware(nodes) + _software(nodes, result.profile) + _target_items(nodes)
        out.append(g)
    return out


def _tokens(v: Any) -> str:
    return _t("%(n)s tokens") % {"n": v}


def workload(result: GateResult) -> list[tuple[str, str]]:
    """Model and load as the profile ran them (only what it recorded)."""
    prof = result.profile
    load = prof.get("load") if isinstance(prof.get("load"), Mapping) else {}
    rows: list[tuple[str, Any]] = [(N_("Model"), prof.get("model"))]
    if prof.get("tensor_parallel_size"):
        rows.append((N_("Tensor parallel size"), prof.get("tensor_parallel_size")))
    if load:
        kind = load.get("workload")
        mode = _t(_MODES.get(str(load.get("mode")), str(load.get("mode", "?"))))
        rows.append((N_("Workload"), f"{kind}, {mode}" if kind else None))
        rows.append((N_("Input / output length"),
                     f"{_tokens(load.get('input_len'))} / {_tokens(load.get('output_len'))}"
                     if load.get("input_len") is not None else None))
        rows.append((N_("Prompts per point"), load.get("prompts_per_point")))
        conc = load.get("concurrency")
        rows.append((N_("Concurrencies"), ", ".join(map(str, conc)) if isinstance(conc, list) else conc))
        rows.append((N_("Repetitions"), load.get("repetitions")))
        rows.append((N_("Warm-up requests"), load.get("warmup")))
        rows.append((N_("Trace"), load.get("trace") or _t("none (synthetic prompts)")))
        if load.get("hit_ratio") is not None:
            rows.append((N_("Expected reuse (share of queries that hit a warmed document)"),
                         fmt(float(load["hit_ratio"]), "percent")))
        rows.append((N_("Cold restore"), _t("yes") if load.get("cold_restore") else _t("no")))
    for arm in prof.get("arms") or []:
        if isinstance(arm, Mapping) and arm.get("name"):
            storage = arm.get("storage") or _t("none")
            offload = _t("offload") if arm.get("offload") else _t("no offload")
            where = _t("storage %(name)s") % {"name": storage}
            rows.append((_t("Arm %(name)s") % {"name": arm["name"]},
                         f"{arm.get('description') or '-'} ({where}, {offload})"))
    soak = result.measurements.get("soak")
    if isinstance(soak, Mapping):
        if soak.get("window_s") is not None:
            rows.append((N_("Soak window"), fmt(float(soak["window_s"]), "duration")))
        if soak.get("warmup_s") is not None:
            rows.append((N_("Soak warm-up"), fmt(float(soak["warmup_s"]), "duration")))
    return [(k, str(v)) for k, v in rows if v not in (None, "")]
