"""The conformance scenario (issue 18 item 5): one script run against the real vLLM CPU server
with LMCache in multiprocess mode and against kvgate's emulator in the same mode, through the
same engine protocol. Its record is the sequence of counter movements (which key figures moved:
absent, zero or non-zero) and of KV files written per step; the two records must be equal.

Steps: populate (documents sent once, chunks stored to L2) -> reset (vLLM's prefix cache reset,
verified, and LMCache's L1 cleared through its API) -> restore (the documents again: served from
L2) -> restart (both processes stopped and started again, L2 files kept) -> restore (served from
L2 again: the fs_native tier survives a restart, unlike in-process LMCache's local disk)."""

from __future__ import annotations

import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.config.inventory import Node
from harness.config.profile import Profile
from harness.engines import delta, drop_page_cache, get_engine
from harness.engines.base import EngineInstance, EvictResult
from harness.engines.lifecycle import http_request, port_free, restart
from harness.engines.prometheus import MetricsDelta, MetricsSnapshot
from harness.remote.local import LocalExecutor
from tests.real_engine.conftest import engine_workdir

DOCS, DOC_TOKENS, CHUNK = 3, 1024, 256

# The figures compared: vLLM's (engine) and the LMCache server's (multiprocess mode), plus the
# in-process LMCache counter, which must be absent in this mode on both.
FIGURES = (
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:external_prefix_cache_queries",
    "vllm:external_prefix_cache_hits",
    "lmcache_mp_lookup_requested_tokens",
    "lmcache_mp_lookup_hit_tokens",
    "lmcache_mp_lookup_hit_l1_tokens",
    "lmcache_mp_lookup_hit_l2_tokens",
    "lmcache:num_hit_tokens",
)


def docs() -> list[list[int]]:
    rng = random.Random(18)
    # token ids below the byte alphabet's size exist in every byte-level BPE vocabulary
    return [[rng.randrange(4, 250) for _ in range(DOC_TOKENS)] for _ in range(DOCS)]


def complete(inst: EngineInstance, ids: list[int]) -> dict[str, Any]:
    body = json.dumps({"model": inst.plan.served_model_name, "prompt": ids, "max_tokens": 2,
                       "temperature": 0.0}).encode()
    status, answer = http_request(inst, "/v1/completions", method="POST", body=body, timeout=300.0)
    assert status == 200, answer[:300]
    return dict(json.loads(answer)["usage"])


def chunk_files(d: Path) -> list[Path]:
    """The KV files under ``d`` (os.walk: the writers rename files while it looks)."""
    return sorted(Path(root, f) for root, _, names in os.walk(d) for f in names
                  if not f.startswith(".") and not f.endswith(".tmp"))


def movement(d: MetricsDelta, after: MetricsSnapshot) -> dict[str, str]:
    """Per figure: 'absent' (not exposed after the step), '0' or '+' (moved during it)."""
    out = {}
    for name in FIGURES:
        if after.value(name) is None:
            out[name] = "absent"
        else:
            out[name] = "+" if (d.counters.get(name) or 0.0) > 0 else "0"
    return out


def present(after: MetricsSnapshot) -> dict[str, str]:
    """Right after a (re)start: which figures are exposed and whether they are already non-zero."""
    return {n: "absent" if after.value(n) is None else ("+" if (after.value(n) or 0) > 0 else "0") for n in FIGURES}


@dataclass
class Record:
    steps: list[dict[str, Any]] = field(default_factory=list)  # name, figures, new_files, files
    evict: Optional[EvictResult] = None
    usages: list[list[dict[str, Any]]] = field(default_factory=list)
    key_figures: list[dict[str, object]] = field(default_factory=list)  # of the two restores
    files_after_populate: int = 0
    seconds: float = 0.0

    def signature(self) -> list[dict[str, Any]]:
        return [{"step": s["step"], "figures": s["figures"], "new_files": s["new_files"], "files": s["files"]}
                for s in self.steps]


def run_scenario(profile: Profile, node: Node, *, arm: str = "mp") -> Record:
    """The scenario on ``profile``'s engine; stops everything it started (asserted)."""
    engine = get_engine(profile.engine.kind)
    rec = Record()
    t0 = time.monotonic()
    with engine_workdir() as workdir, LocalExecutor("local") as ex:
        plan = engine.plan(node, profile, arm, 0, workdir=workdir, python=sys.executable)
        kv = Path(plan.kv_dirs[0])
        inst = engine.start(ex, plan)
        handles = [inst.handle, *([inst.sidecar_handle] if inst.sidecar_handle else [])]
        try:
            engine.wait_ready(inst)
            if profile.engine.kind == "vllm":  # its sockets where kvgate put them, not in the node's /tmp
                assert any(f.is_socket() for f in Path(plan.instance_dir).iterdir()), \
                    f"no vLLM socket in {plan.instance_dir} (VLLM_RPC_BASE_PATH {plan.env.get('VLLM_RPC_BASE_PATH')})"
            snap = engine.scrape_metrics(inst)
            files = 0

            def step(name: str, after: MetricsSnapshot, figures: dict[str, str]) -> None:
                nonlocal snap, files
                now = len(chunk_files(kv))
                rec.steps.append({"step": name, "figures": figures,
                                  "new_files": "+" if now > files else "0", "files": "+" if now else "0"})
                snap, files = after, now

            usages = [complete(inst, doc) for doc in docs()]
            deadline = time.monotonic() + 120  # chunks are stored behind the response
            while len(chunk_files(kv)) < DOCS * DOC_TOKENS // CHUNK and time.monotonic() < deadline:
                time.sleep(0.5)
            rec.files_after_populate = len(chunk_files(kv))
            after = engine.scrape_metrics(inst)
            step("populate", after, movement(delta(snap, after), after))
            rec.usages.append(usages)

            rec.evict = engine.evict(inst)
            inst = rec.evict.instance
            drop_page_cache(ex)
            after = engine.scrape_metrics(inst)
            step("reset", after, movement(delta(snap, after), after))

            for name in ("restore", "restart", "restore_after_restart"):
                if name == "restart":
                    inst = restart(engine, inst)
                    handles += [inst.handle, *([inst.sidecar_handle] if inst.sidecar_handle else [])]
                    drop_page_cache(ex)
                    after = engine.scrape_metrics(inst)
                    step(name, after, present(after))
                    continue
                usages = [complete(inst, doc) for doc in docs()]
                after = engine.scrape_metrics(inst)
                d = delta(snap, after)
                rec.key_figures.append(d.key_figures())
                rec.usages.append(usages)
                step(name, after, movement(d, after))
        finally:
            engine.stop(inst, remove_kv_files=True)
            rec.seconds = time.monotonic() - t0
            # nothing left behind: processes, ports, KV files
            assert all(not ex.poll(h).running for h in handles)
            assert port_free(ex, plan.host, plan.port)
            if plan.sidecar is not None:
                assert port_free(ex, plan.sidecar.host, plan.sidecar.port)
                assert port_free(ex, plan.sidecar.host, plan.sidecar.http_port)
            assert not any(Path(d).exists() for d in plan.kv_dirs)
    return rec


def diff(real: list[dict[str, Any]], emu: list[dict[str, Any]]) -> list[str]:
    """Where two signatures disagree, one line each (empty: they agree)."""
    out = []
    for r, e in zip(real, emu):
        for key in ("new_files", "files"):
            if r[key] != e[key]:
                out.append(f"{r['step']}: {key} real {r[key]} vs emulator {e[key]}")
        for name in FIGURES:
            if r["figures"][name] != e["figures"][name]:
                out.append(f"{r['step']}: {name} real {r['figures'][name]} vs emulator {e['figures'][name]}")
    if len(real) != len(emu):
        out.append(f"steps: real {len(real)} vs emulator {len(emu)}")
    return out
