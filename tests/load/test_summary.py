"""Summary keys and definitions against vLLM's, and import of vLLM result files."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.load.errors import LoadInputError
from harness.load.summary import Summary, records_from_vllm, stat_keys

DATA = Path(__file__).resolve().parent.parent / "data" / "load"

# The keys of a `vllm bench serve --save-result` file (vllm/benchmarks/serve.py: the setup block,
# the benchmark result dict without the --save-detailed arrays, and process_one_metric for
# ttft/tpot/itl/e2el and client_queue_time with --metric-percentiles 50,90,95,99).
VLLM_SETUP_KEYS = {
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate",
    "burstiness", "max_concurrency",
}
VLLM_METRIC_KEYS = {
    "duration", "completed", "failed", "total_input_tokens",
    "total_output_tokens", "request_throughput", "request_goodput", "output_throughput",
    "total_token_throughput", "max_output_tokens_per_s", "max_concurrent_requests", "rtfx",
} | {k for m in ("ttft", "tpot", "itl", "e2el", "client_queue_time") for k in stat_keys(m)}
VLLM_KEYS = VLLM_SETUP_KEYS | VLLM_METRIC_KEYS


def _records(n: int = 40, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ntok = rng.randint(1, 6)
        ttft = rng.uniform(5, 50)
        itl = [rng.uniform(1, 3) for _ in range(ntok - 1)]
        e2el = ttft + sum(itl)
        out.append({"request_id": f"r{i}", "phase": "measure", "status": "ok", "start_ns": i * 10_000_000,
                    "ttft_ms": ttft, "itl_ms": itl, "e2el_ms": e2el,
                    "tpot_ms": (e2el - ttft) / (ntok - 1) if ntok > 1 else None,
                    "input_tokens": 100 + i, "output_tokens": ntok, "queue_ms": rng.uniform(0, 1)})
    out.append({"request_id": "bad", "phase": "measure", "status": "error", "error_kind": "http_500",
                "error": "boom", "start_ns": 0, "input_tokens": 5, "output_tokens": 0, "itl_ms": []})
    out.append({"request_id": "w", "phase": "warmup", "status": "ok", "start_ns": 0, "ttft_ms": 999.0,
                "itl_ms": [], "e2el_ms": 999.0, "input_tokens": 1, "output_tokens": 1})
    out.append({"request_id": "c", "phase": "measure", "status": "cancelled", "error_kind": "cancelled",
                "start_ns": 0, "input_tokens": 1, "output_tokens": 0, "itl_ms": []})
    return out


def test_metric_keys_are_vllm_keys() -> None:
    s = Summary.from_records(_records(), duration_s=2.0)
    assert VLLM_METRIC_KEYS <= set(s.data)
    extra = set(s.data) - VLLM_METRIC_KEYS
    assert extra == {"cancelled", "errors_by_kind", "error_examples", "kvgate"}


def test_definitions_match_vllm_with_numpy() -> None:
    recs = _records()
    s = Summary.from_records(recs, duration_s=2.0, goodput={"ttft": 30.0, "tpot": 2.5})
    ok = [r for r in recs if r["status"] == "ok" and r["phase"] == "measure"]
    assert (s["completed"], s["failed"], s["cancelled"]) == (40, 1, 1)
    assert s["errors_by_kind"] == {"http_500": 1} and s["error_examples"] == {"http_500": "boom"}
    tin = sum(r["input_tokens"] for r in ok)
    tout = sum(r["output_tokens"] for r in ok)
    assert (s["total_input_tokens"], s["total_output_tokens"]) == (tin, tout)
    assert s["request_throughput"] == pytest.approx(40 / 2.0)
    assert s["output_throughput"] == pytest.approx(tout / 2.0)
    assert s["total_token_throughput"] == pytest.approx((tin + tout) / 2.0)
    series = {
        "ttft": [r["ttft_ms"] for r in ok], "e2el": [r["e2el_ms"] for r in ok],
        "tpot": [r["tpot_ms"] for r in ok if r["output_tokens"] > 1],
        "itl": [x for r in ok for x in r["itl_ms"]], "client_queue_time": [r["queue_ms"] for r in ok],
    }
    for m, xs in series.items():
        assert s[f"mean_{m}_ms"] == pytest.approx(np.mean(xs))
        assert s[f"median_{m}_ms"] == pytest.approx(np.median(xs))
        assert s[f"std_{m}_ms"] == pytest.approx(np.std(xs))
        for p in (50, 90, 95, 99):
            assert s[f"p{p}_{m}_ms"] == pytest.approx(np.percentile(xs, p)), (m, p)
    good = sum(1 for r in ok if r["ttft_ms"] <= 30.0 and (r["tpot_ms"] or 0.0) <= 2.5)
    assert s["request_goodput"] == pytest.approx(good / 2.0) and 0 < good < 40
    # requests are 10 ms apart and each lasts < 10 ms + 50 ms: at most 6 overlap
    assert 1 <= s["max_concurrent_requests"] <= 6


def test_no_goodput_slo_gives_none_and_empty_run_gives_zeros() -> None:
    s = Summary.from_records([], duration_s=1.0)
    assert s["request_goodput"] is None and s["completed"] == 0 and s["mean_ttft_ms"] == 0.0
    with pytest.raises(LoadInputError, match="goodput"):
        Summary.from_records(_records(), duration_s=1.0, goodput={"latency": 1.0})


def test_vllm_result_imports(tmp_path: Path) -> None:
    s = Summary.load(DATA / "vllm_result.json")
    assert s.source == "vllm" and s["completed"] == 3 and s["p99_ttft_ms"] == 149.0
    assert set(json.loads((DATA / "vllm_result.json").read_text())) <= set(s.data)
    assert records_from_vllm(s.data) == []
    # our own summary round-trips through save/load
    mine = Summary.from_records(_records(), duration_s=2.0)
    mine.save(tmp_path / "summary.json")
    assert Summary.load(tmp_path / "summary.json").data == json.loads(json.dumps(mine.data))


def test_detailed_vllm_result_becomes_records() -> None:
    s = Summary.load(DATA / "vllm_result_detailed.json")
    recs = records_from_vllm(s.data)
    assert len(recs) == 4 and [r["status"] for r in recs] == ["ok", "ok", "ok", "error"]
    assert recs[0]["ttft_ms"] == pytest.approx(100.0) and len(recs[0]["itl_ms"]) == 127
    assert recs[0]["tpot_ms"] == pytest.approx((1624 - 100) / 127)
    again = Summary.from_records(recs, duration_s=s["duration"])
    assert again["completed"] == s["completed"] and again["failed"] == s["failed"]
    assert again["total_output_tokens"] == s["total_output_tokens"]


def test_appended_result_file_takes_the_last_object(tmp_path: Path) -> None:
    one = json.loads((DATA / "vllm_result.json").read_text())
    two = dict(one, completed=7)
    f = tmp_path / "appended.json"
    f.write_text(json.dumps(one) + "\n" + json.dumps(two))
    assert Summary.load(f)["completed"] == 7


@pytest.mark.parametrize("content, match", [
    ("{\"completed\": 1}", "missing key"),
    ("[1, 2]", "expected a JSON object"),
    ('{"completed": "x", "duration": 1, "total_input_tokens": 0, "request_throughput": 0}', "expected a number"),
    ("{not json\n", "not JSON"),
])
def test_bad_result_files_are_named(tmp_path: Path, content: str, match: str) -> None:
    f = tmp_path / "r.json"
    f.write_text(content)
    with pytest.raises(LoadInputError, match=match) as e:
        Summary.load(f)
    assert str(f) in str(e.value)
