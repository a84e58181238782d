"""One client measurement for bench/ttft_accuracy.py, in its own process.

``--client kvgate`` runs kvgate's load runner (``harness.load.run_load_async``: the client with
full SSE and JSON handling, records written and flushed as in a real run). ``--client aiohttp``
is a reference written the way vLLM's benchmark request function is: one shared
``aiohttp.ClientSession`` whose connector limit is the concurrency, ``response.content.iter_any()``,
an incremental UTF-8 decode, SSE messages split on blank lines, ``json.loads`` per message and
``time.perf_counter`` taken when a message with choices is handled; concurrency bounded by a
semaphore over tasks created for every request; the heap frozen before measuring (vLLM's
``freeze_gc_heap``).

Both first warm their connections with one request per slot (excluded), then run ``--requests``
requests closed loop at ``--concurrency``. ``--prompt-tokens N``: prompts of N words instead of
four (kvgate: the long-doc workload's lazy prompts, built as each request is sent, ``build_ms``
from its records; the reference: built before its run, the time per prompt reported).
Prints one JSON line: first-token times (perf_counter_ns, CLOCK_MONOTONIC) by request id, output
tokens ingested and the elapsed time.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import gc
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


SHORT_PROMPT = "alpha beta gamma delta"


def _long_prompts(n: int, prompt_tokens: int) -> tuple[list[str], float]:
    """The reference's prompts, built before its run (eager), and the seconds that took."""
    import random

    from harness.load.vocabulary import words

    t0 = time.perf_counter()
    out = [words(random.Random(i), prompt_tokens) for i in range(n)]
    return out, time.perf_counter() - t0


async def _aiohttp(url: str, concurrency: int, n: int, tokens: int, prompt_tokens: int = 0) -> dict[str, Any]:
    import aiohttp

    prompts, build_s = _long_prompts(n, prompt_tokens) if prompt_tokens else ([], 0.0)

    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency, ttl_dns_cache=300,
                                     use_dns_cache=True, keepalive_timeout=60, enable_cleanup_closed=True,
                                     force_close=False)
    session = aiohttp.ClientSession(connector=connector, trust_env=True,
                                    timeout=aiohttp.ClientTimeout(total=6 * 60 * 60))
    first: dict[str, int] = {}
    out_tokens = 0

    async def one(rid: str) -> None:
        nonlocal out_tokens
        prompt = prompts[int(rid[2:])] if prompts and rid.startswith("a-") else SHORT_PROMPT
        payload = {"model": "bench", "prompt": prompt, "repetition_penalty": 1.0,
                   "max_tokens": tokens, "logprobs": None, "stream": True,
                   "stream_options": {"include_usage": True}, "ignore_eos": True}
        got_first = False
        async with session.post(url=url, json=payload, headers={"x-request-id": rid}) as resp:
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}")
            decoder = codecs.getincrementaldecoder("utf-8")()
            buf = ""
            async for raw in resp.content.iter_any():
                raw = raw.strip()
                if not raw:
                    continue
                buf += decoder.decode(raw)
                msgs = []
                while "\n\n" in buf:
                    m, buf = buf.split("\n\n", 1)
                    m = m.strip()
                    if m:
                        msgs.append(m)
                if buf.startswith("data: "):
                    rest = buf[6:].strip()
                    if rest == "[DONE]":
                        msgs.append(buf.strip())
                        buf = ""
                    elif rest:
                        try:
                            json.loads(rest)
                            msgs.append(buf.strip())
                            buf = ""
                        except json.JSONDecodeError:
                            pass
                for m in msgs:
                    if m.startswith(":"):
                        continue
                    body = m.removeprefix("data: ")
                    if body == "[DONE]":
                        continue
                    data = json.loads(body)
                    if data.get("choices"):
                        ts = time.perf_counter_ns()
                        if not got_first:
                            got_first = True
                            first[rid] = ts
                    elif usage := data.get("usage"):
                        out_tokens += usage.get("completion_tokens") or 0

    sem = asyncio.Semaphore(concurrency)

    async def limited(rid: str) -> None:
        async with sem:
            await one(rid)

    try:
        await asyncio.gather(*(limited(f"warm-{i}") for i in range(concurrency)))
        first.clear()
        out_tokens = 0
        gc.collect()  # as vLLM's freeze_gc_heap() before the measured run
        gc.freeze()
        t0 = time.perf_counter()
        await asyncio.gather(*(limited(f"a-{i}") for i in range(n)))
        elapsed = time.perf_counter() - t0
    finally:
        await session.close()
    return {"first_ns": first, "tokens": out_tokens, "elapsed_s": elapsed, "build_ms": [build_s * 1000 / max(1, n)]}


async def _kvgate(url: str, concurrency: int, n: int, tokens: int, prompt_tokens: int = 0,
                  eager: bool = False) -> dict[str, Any]:
    from collections.abc import Sequence

    from harness.load.records import read_records
    from harness.load.runner import LoadConfig, run_load_async
    from harness.load.spec import RequestSpec
    from harness.load.workloads import Workload, build_workload

    warm = [RequestSpec(f"warm-{i}", SHORT_PROMPT, 4, tokens) for i in range(concurrency)]
    measured: Sequence[RequestSpec]
    if prompt_tokens:
        # the long-doc workload's lazy prompts: each built when its request is sent
        measured = build_workload("long-doc", {"num_docs": n, "doc_len": prompt_tokens, "query_len": 0,
                                               "num_queries": n, "output_len": tokens}, 0).measured
        if eager:
            measured = list(measured)  # every prompt built before the run, as the reference does
    else:
        measured = [RequestSpec(f"k-{i}", SHORT_PROMPT, 4, tokens) for i in range(n)]
    wl = Workload("bench", {}, 0, measured, warm)
    cfg = LoadConfig(endpoint=url, model="bench", concurrency=concurrency, progress=False)
    with tempfile.TemporaryDirectory() as d:
        s = await run_load_async(cfg, Path(d), workload=wl, handle_signals=False)
        recs = read_records(Path(d) / "records.jsonl")
    first = {r["request_id"]: r["start_ns"] + round(r["ttft_ms"] * 1e6) for r in recs if r["status"] == "ok"}
    return {"first_ns": first, "tokens": s["total_output_tokens"], "elapsed_s": s["duration"],
            "failed": s["failed"], "build_ms": [r["build_ms"] for r in recs if r.get("build_ms") is not None]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--client", choices=["kvgate", "aiohttp"], required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--concurrency", type=int, required=True)
    p.add_argument("--requests", type=int, required=True)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--prompt-tokens", type=int, default=0, help="long prompts of this many words (0: 4 words)")
    p.add_argument("--eager", action="store_true", help="kvgate: build the long prompts before the run")
    a = p.parse_args()
    if a.client == "kvgate":
        res = asyncio.run(_kvgate(a.url, a.concurrency, a.requests, a.tokens, a.prompt_tokens, a.eager))
    else:
        res = asyncio.run(_aiohttp(a.url, a.concurrency, a.requests, a.tokens, a.prompt_tokens))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
