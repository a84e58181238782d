"""The cold restore's drain -> evict -> prove-empty steps (issue 33 items 1 and 2), on the emulator
whose tier writes lag behind the populate (a slow disk's backlog, KVGATE_SIM_TIER_WRITE_DELAY_MS).

The old protocol (evict right after the populate) leaves the chunks still being written in host
memory, since a non-forced clear keeps them as LMCache's does, and the restore reads them from
there; the new one (drain, evict, prove empty) serves every chunk from the storage tier."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.engines import drop_page_cache, get_engine
from harness.engines.base import EngineInstance
from harness.engines.lifecycle import port_free
from harness.pipelines.shared.drain import cold_evict, prove_memory_empty
from harness.pipelines.shared.tierhits import memory_hit_requests
from harness.ports import free_ports
from harness.remote.local import LocalExecutor
from harness.sim.cli import WRITE_DELAY_ENV
from tests.real_engine.conftest import local_node, real_profile
from tests.real_engine.scenario import complete

DOCS, DOC_TOKENS = 3, 1024
WRITE_DELAY_MS = "250"  # 12 chunks a populate: ~3 s of write backlog, several times what the evict takes


def _docs(seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(4, 250) for _ in range(DOC_TOKENS)] for _ in range(DOCS)]


IN_PROCESS = {"name": "ip", "storage": "fast",
              "lmcache": {"mode": "in_process", "chunk_size": 256, "local_cpu": True, "max_local_cpu_size": 1,
                          "max_local_disk_size": 1}}


@contextmanager
def _engine(tmp: Path, arm: str) -> Iterator[EngineInstance]:
    """The emulator for ``arm`` with slow tier writes; everything it started is stopped."""
    port = free_ports(3)
    profile = real_profile(tmp, port=port, mp_port=port + 1, kind="sim", more_arms=[IN_PROCESS])
    engine = get_engine("sim")
    with LocalExecutor("local") as ex:
        plan = engine.plan(local_node(tmp / "tier"), profile, arm, 0, workdir=str(tmp / "w"), python=sys.executable)
        slow = {WRITE_DELAY_ENV: WRITE_DELAY_MS}
        if plan.sidecar is not None:
            plan = replace(plan, sidecar=replace(plan.sidecar, env={**plan.sidecar.env, **slow}))
        else:
            plan = replace(plan, env={**plan.env, **slow})
        inst = engine.start(ex, plan)
        try:
            engine.wait_ready(inst)
            yield inst
        finally:
            engine.stop(inst, remove_kv_files=True)
            assert port_free(ex, plan.host, plan.port)


def _restore(inst: EngineInstance, docs: list[list[int]]) -> tuple[float | None, str]:
    engine = get_engine("sim")
    before = engine.scrape_metrics(inst)
    for doc in docs:
        complete(inst, doc)
    after = engine.scrape_metrics(inst)
    return memory_hit_requests([before], [after], requests=len(docs))


def _populate_then(inst: EngineInstance, docs: list[list[int]], *, drain: bool) -> tuple[EngineInstance, bool | None]:
    engine = get_engine("sim")
    for doc in docs:
        complete(inst, doc)
    if not drain:  # the old protocol: evict at once
        inst = engine.evict(inst).instance
        empty = prove_memory_empty(engine, inst).empty
    else:  # the sweep's
        protocol: dict[str, Any] = {}
        instances = [inst]
        assert cold_evict(engine, instances, protocol, lambda i, new: None) is None, protocol
        assert protocol["drain"][0]["waited_s"] > 1.0, protocol  # it really waited for the backlog
        first = protocol["drain"][0]["first_figures"]  # the backlog it waited for, as first seen
        assert (first.get("kvgate_sim:pending_tier_writes") or 0) > 0 or (
            (first.get("lmcache_mp_l2_store_completed_objects_chunks") or 0)
            < (first.get("lmcache_mp_l2_store_submitted_objects_chunks") or 0)), protocol
        inst, empty = instances[0], protocol["memory_empty"][0]["empty"]
    drop_page_cache(inst.executor)
    return inst, empty


def test_multiprocess_old_protocol_serves_l1_and_the_new_one_serves_l2_only(tmp_path: Path) -> None:
    with _engine(tmp_path, "mp") as inst:
        inst, empty = _populate_then(inst, _docs(1), drain=False)
        assert empty is False  # the clear kept the chunks still being written: the new check sees it
        hits, how = _restore(inst, _docs(1))
        assert hits is not None and hits > 0, how  # the old protocol measured DRAM
        inst, empty = _populate_then(inst, _docs(2), drain=True)
        assert empty is True
        hits, how = _restore(inst, _docs(2))
        assert hits == 0, how
        snap = get_engine("sim").scrape_metrics(inst)
        assert (snap.value("lmcache_mp_l2_store_submitted_objects_chunks")
                == snap.value("lmcache_mp_l2_store_completed_objects_chunks"))


def test_in_process_old_protocol_serves_the_cpu_tier_and_the_new_one_the_disk(tmp_path: Path) -> None:
    with _engine(tmp_path, "ip") as inst:
        inst, empty = _populate_then(inst, _docs(3), drain=False)
        assert empty is False
        hits, how = _restore(inst, _docs(3))
        assert hits is not None and hits > 0, how
        inst, empty = _populate_then(inst, _docs(4), drain=True)
        assert empty is True
        hits, how = _restore(inst, _docs(4))
        assert hits == 0, how
