"""A G3-style sweep point against a real vLLM CPU server with real LMCache in multiprocess mode
(``lmcache server`` with an fs_native L2 on a real directory): plan -> start -> wait_ready ->
populate -> cold restore (prefix-cache reset verified, L1 cleared through LMCache's API, page cache
dropped) -> scrape -> measure -> scrape -> stop. The recompute arm runs the same point without a
connector. What the engine's own counters say decides, as in a real run."""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.engines import delta, drop_page_cache, get_engine
from harness.engines.base import EngineInstance, EvictResult
from harness.engines.lifecycle import http_request, port_free
from harness.engines.prometheus import MetricsDelta
from harness.remote.local import LocalExecutor
from tests.real_engine.conftest import SERVED, free_ports, local_node, real_profile

DOCS, DOC_TOKENS, CHUNK = 3, 1024, 256
pytestmark = pytest.mark.timeout(3000)  # two server starts; minutes each on a loaded 2-core machine


def _docs() -> list[list[int]]:
    rng = random.Random(18)
    # token ids below the byte alphabet's size exist in every byte-level BPE vocabulary
    return [[rng.randrange(4, 250) for _ in range(DOC_TOKENS)] for _ in range(DOCS)]


def _complete(inst: EngineInstance, ids: list[int]) -> dict[str, Any]:
    body = json.dumps({"model": SERVED, "prompt": ids, "max_tokens": 2, "temperature": 0.0}).encode()
    status, answer = http_request(inst, "/v1/completions", method="POST", body=body, timeout=300.0)
    assert status == 200, answer[:300]
    return dict(json.loads(answer)["usage"])


def _chunk_files(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file()) if d.exists() else []


def _point(env: Path, arm: str, tmp: Path) -> tuple[EvictResult, MetricsDelta, list[Path], list[dict[str, Any]], float]:
    port = free_ports(3)  # the engine, then the LMCache server's request and HTTP ports
    mp_port = port + 1
    profile = real_profile(env, port=port, mp_port=mp_port)
    node = local_node(tmp / "tier")
    engine = get_engine("vllm")
    t0 = time.monotonic()
    with LocalExecutor("local") as ex:
        plan = engine.plan(node, profile, arm, 0, workdir=str(tmp / "w"), python=sys.executable)
        inst = engine.start(ex, plan)
        handles = [inst.handle, *([inst.sidecar_handle] if inst.sidecar_handle else [])]
        try:
            engine.wait_ready(inst)
            for doc in _docs():
                _complete(inst, doc)
            files: list[Path] = []
            if plan.kv_dirs:
                kv = Path(plan.kv_dirs[0])
                deadline = time.monotonic() + 120
                while len(_chunk_files(kv)) < DOCS * DOC_TOKENS // CHUNK and time.monotonic() < deadline:
                    time.sleep(0.5)
                files = _chunk_files(kv)
            res = engine.evict(inst)
            inst = res.instance
            drop_page_cache(ex)
            before = engine.scrape_metrics(inst)
            usages = [_complete(inst, doc) for doc in _docs()]
            after = engine.scrape_metrics(inst)
            return res, delta(before, after), files, usages, time.monotonic() - t0
        finally:
            engine.stop(inst, remove_kv_files=True)
            # nothing left behind: processes, ports, KV files
            assert all(not ex.poll(h).running for h in handles)
            assert port_free(ex, plan.host, plan.port)
            if plan.sidecar is not None:
                assert port_free(ex, plan.sidecar.host, plan.sidecar.port)
                assert port_free(ex, plan.sidecar.host, plan.sidecar.http_port)
            assert not any(Path(d).exists() for d in plan.kv_dirs)


def test_multiprocess_cold_restore_is_served_from_storage_and_recompute_is_not(real_env: Path, tmp_path: Path) -> None:
    res, d, files, usages, took = _point(real_env, "mp", tmp_path / "mp")
    fig = d.key_figures()
    print(f"\nmp arm: {took:.0f} s; key figures {fig}")
    # the chunks were written to the storage directory by LMCache's fs_native L2
    assert len(files) >= DOCS * DOC_TOKENS // CHUNK, files
    # the cold restore: prefix cache reset in place and verified, L1 cleared through the API
    assert res.method == "reset_prefix_cache" and res.reset_verified is True
    assert [s["step"] for s in res.steps] == ["reset_prefix_cache", "lmcache_l1_clear"]
    assert res.steps[0]["probe_prefix_hits_after"] == 0 and res.steps[0]["probe_prefix_hits_before"] > 0
    # token-exact prompts: the server counted exactly the tokens sent
    assert [u["prompt_tokens"] for u in usages] == [DOC_TOKENS] * DOCS
    # the measurement: nothing from vLLM's own prefix cache, the prefix served from LMCache's L2
    assert fig["engine_prefix_hit_tokens"] == 0
    assert fig["prompt_tokens_queried"] == DOCS * DOC_TOKENS
    assert fig["offload_hit_tokens"] is not None and fig["offload_hit_tokens"] >= DOCS * (DOC_TOKENS - CHUNK)
    assert fig["lmcache_mp_l2_hit_tokens"] == DOCS * DOC_TOKENS  # read back from the files, not L1

    res, d, files, usages, took = _point(real_env, "recompute", tmp_path / "rc")
    fig = d.key_figures()
    print(f"recompute arm: {took:.0f} s; key figures {fig}")
    assert not files and res.reset_verified is True
    assert fig["engine_prefix_hit_tokens"] == 0
    assert fig["prompt_tokens_queried"] == DOCS * DOC_TOKENS
    assert fig["offload_hit_tokens"] == 0  # vLLM exposes the external counter; no connector, no hits
    assert fig["lmcache_mp_l2_hit_tokens"] is None  # no LMCache server, no such counter
