"""The cold restore's drain -> evict -> prove-empty steps (issue 33 item 1) against a real vLLM CPU
server with a real ``lmcache server`` (multiprocess mode, fs_native L2): the drain reads LMCache's
own L2 store counters, its L1 usage gauge shows the memory tier empty after the clear, and no
measured request is served from L1, counted per request from the server's own counters."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from harness.engines import drop_page_cache, get_engine
from harness.engines.lifecycle import port_free
from harness.pipelines.drain import MP_L1_USAGE, MP_SUBMITTED, cold_evict
from harness.pipelines.tierhits import memory_hit_requests
from harness.remote.local import LocalExecutor
from tests.real_engine.conftest import free_ports, local_node, real_profile
from tests.real_engine.scenario import DOC_TOKENS, DOCS, complete, docs

pytestmark = pytest.mark.timeout(3000)  # one server start: minutes on a loaded 2-core machine


def test_real_multiprocess_restore_drains_proves_l1_empty_and_serves_no_memory_hit(
        real_env: Path, tmp_path: Path) -> None:
    port = free_ports(3)
    profile = real_profile(real_env, port=port, mp_port=port + 1)
    engine = get_engine("vllm")
    with LocalExecutor("local") as ex:
        plan = engine.plan(local_node(tmp_path / "tier"), profile, "mp", 0, workdir=str(tmp_path / "w"),
                           python=sys.executable)
        inst = engine.start(ex, plan)
        handles = [inst.handle, *([inst.sidecar_handle] if inst.sidecar_handle else [])]
        try:
            engine.wait_ready(inst)
            for doc in docs():
                complete(inst, doc)
            at_populate = engine.scrape_metrics(inst)
            instances = [inst]
            protocol: dict[str, Any] = {}
            assert cold_evict(engine, instances, protocol, lambda i, new: None) is None, protocol
            inst = instances[0]
            drop_page_cache(ex)
            before = engine.scrape_metrics(inst)
            for doc in docs():
                complete(inst, doc)
            after = engine.scrape_metrics(inst)
        finally:
            engine.stop(inst, remove_kv_files=True)
            handles += [inst.handle]
            assert all(not ex.poll(h).running for h in handles)
            assert port_free(ex, plan.host, plan.port)
    print(f"\nright after populate: L1 {at_populate.value(MP_L1_USAGE)} B, L2 stores submitted "
          f"{at_populate.value(MP_SUBMITTED)}; drain {protocol['drain']}; empty {protocol['memory_empty']}")
    # LMCache's own figures decided the drain and showed L1 empty (lmcache 0.5.6 names)
    assert protocol["drain"][0]["method"] == "lmcache server L2 store counters", protocol["drain"]
    assert protocol["memory_empty"][0] == {"node": "local", "empty": True, "figures": {MP_L1_USAGE: 0.0},
                                           "detail": "LMCache server L1 usage"}
    hits, how = memory_hit_requests([before], [after], requests=DOCS)
    assert hits == 0, how
    assert (after.value("lmcache_mp_lookup_hit_l2_tokens") or 0) - (
        before.value("lmcache_mp_lookup_hit_l2_tokens") or 0) == DOCS * DOC_TOKENS
