"""Run summaries with the key names and definitions of ``vllm bench serve --save-result``.

From vLLM's ``vllm/benchmarks/serve.py`` (``calculate_metrics`` and the result dict):

* ``completed`` successful requests; ``failed`` the others; ``duration`` seconds of the measured
  run; ``total_input_tokens`` / ``total_output_tokens`` summed over completed requests;
  ``request_throughput`` = completed / duration; ``output_throughput`` = output tokens / duration;
  ``total_token_throughput`` = (input + output) / duration; ``request_goodput`` = requests meeting
  every SLO (``ttft``, ``tpot``, ``e2el`` in ms, a request with one output token has TPOT 0) per
  second, ``None`` without SLOs; ``max_output_tokens_per_s`` the busiest 1 s bucket of token
  arrivals; ``max_concurrent_requests`` the peak overlap of completed requests' [start, end).
* ``mean_X_ms``, ``median_X_ms``, ``std_X_ms`` (population), ``pNN_X_ms`` (linear interpolation)
  for X in ttft, tpot (requests with more than one output token), itl (every token gap), e2el;
  and ``client_queue_time`` (vLLM's name for time waiting for a concurrency slot).

kvgate adds ``cancelled`` (stopped by SIGINT/SIGTERM, neither completed nor failed),
``errors_by_kind``, ``error_examples`` and a ``kvgate`` block (source, workload, interruption);
``prompt_build`` statistics (``mean_prompt_build_ms``...: prompts the runner built just before
sending, records with ``build_ms``; absent when every prompt was built up front); and, when records
carry a session ``turn``, ``ttft_by_turn``: per turn index (``"1"``, ``"2"``...) ``completed`` and
the TTFT statistics of that turn's successful requests (turn 1 pays the whole prefill, later
turns show the reuse of the session's history).
``Summary.from_vllm_result`` imports a vLLM result file into the same model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.load.errors import LoadInputError
from harness.load.stats import mean, percentile_sorted, std

DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0)
METRICS = ("ttft", "tpot", "itl", "e2el")
GOODPUT_METRICS = ("ttft", "tpot", "e2el")


def _pword(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


def stat_keys(metric: str, percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> list[str]:
    return [f"mean_{metric}_ms", f"median_{metric}_ms", f"std_{metric}_ms"] + [
        f"p{_pword(p)}_{metric}_ms" for p in percentiles]


def _goodput(ok: Sequence[Mapping[str, Any]], goodput: Mapping[str, float], dur: float) -> float:
    """Requests per second that met every SLO of ``goodput`` (metric -> ms), as vLLM counts them."""
    unknown = sorted(set(goodput) - set(GOODPUT_METRICS))
    if unknown:
        raise LoadInputError(f"goodput SLO {', '.join(unknown)}: expected one of {', '.join(GOODPUT_METRICS)}")
    n_good = 0
    for r in ok:
        vals = {"ttft": float(r["ttft_ms"]), "e2el": float(r["e2el_ms"]),
                "tpot": float(r["tpot_ms"]) if int(r.get("output_tokens") or 0) > 1
                and r.get("tpot_ms") is not None else 0.0}
        if all(vals[k] <= slo for k, slo in goodput.items()):
            n_good += 1
    return n_good / dur


def _errors_by_kind(failed: Sequence[Mapping[str, Any]]) -> tuple[dict[str, int], dict[str, str]]:
    """Failed requests counted by kind, with the first message of each kind."""
    kinds: dict[str, int] = {}
    examples: dict[str, str] = {}
    for r in failed:
        k = str(r.get("error_kind") or "unknown")
        kinds[k] = kinds.get(k, 0) + 1
        examples.setdefault(k, str(r.get("error") or ""))
    return kinds, examples


def _stats_into(out: dict[str, Any], metric: str, values: list[float], percentiles: Sequence[float]) -> None:
    s = sorted(values)
    out[f"mean_{metric}_ms"] = mean(s)
    out[f"median_{metric}_ms"] = percentile_sorted(s, 50.0)
    out[f"std_{metric}_ms"] = std(s)
    for p in percentiles:
        out[f"p{_pword(p)}_{metric}_ms"] = percentile_sorted(s, p)


def _peak_concurrency(intervals: Iterable[tuple[int, int]]) -> int:
    events: list[tuple[int, int]] = []
    for a, b in intervals:
        events.append((a, 1))
        events.append((b, -1))
    events.sort()  # at equal times -1 sorts first: half-open intervals
    cur = peak = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    return peak


def _max_tokens_per_s(ok: Sequence[Mapping[str, Any]]) -> float:
    if not ok:
        return 0.0
    t0 = min(r["start_ns"] for r in ok)
    buckets: dict[int, int] = {}
    for r in ok:
        t = r["start_ns"] + r["ttft_ms"] * 1e6
        times = [t]
        for gap in r.get("itl_ms") or ():
            t += gap * 1e6
            times.append(t)
        for x in times:
            b = int((x - t0) // 1e9)
            buckets[b] = buckets.get(b, 0) + 1
    return float(max(buckets.values()))


def ttft_by_turn(ok: Sequence[Mapping[str, Any]],
                 percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> dict[str, dict[str, Any]]:
    """TTFT statistics of successful session turns, per turn index (keys in turn order)."""
    by: dict[int, list[float]] = {}
    for r in ok:
        t = r.get("turn")
        if t is not None and r.get("ttft_ms") is not None:
            by.setdefault(int(t), []).append(float(r["ttft_ms"]))
    out: dict[str, dict[str, Any]] = {}
    for t in sorted(by):
        row: dict[str, Any] = {"completed": len(by[t])}
        _stats_into(row, "ttft", by[t], percentiles)
        out[str(t)] = row
    return out


@dataclass
class Summary:
    """A run summary: ``data`` holds the vLLM-named keys (and kvgate's additions)."""

    data: dict[str, Any]
    source: str = "kvgate"
    path: Optional[Path] = field(default=None, compare=False)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
        tmp.replace(path)
        self.path = path

    @classmethod
    def load(cls, path: Path) -> Summary:
        """A kvgate ``summary.json`` or a ``vllm bench serve --save-result`` file."""
        data = _read_json(path)
        if isinstance(data.get("kvgate"), dict) and data["kvgate"].get("source") == "kvgate":
            return cls(data, "kvgate", path)
        return cls.from_vllm_result(path)

    @classmethod
    def from_records(cls, records: Sequence[Mapping[str, Any]], *, duration_s: float,
                     percentiles: Sequence[float] = DEFAULT_PERCENTILES,
                     goodput: Optional[Mapping[str, float]] = None,
                     setup: Optional[Mapping[str, Any]] = None,
                     extra: Optional[Mapping[str, Any]] = None) -> Summary:
        """Summarise measured records (warm-up records are ignored) over ``duration_s``."""
        recs = [r for r in records if r.get("phase", "measure") == "measure"]
        ok = [r for r in recs if r.get("status") == "ok"]
        failed = [r for r in recs if r.get("status") == "error"]
        cancelled = [r for r in recs if r.get("status") == "cancelled"]
        dur = duration_s if duration_s > 0 else float("nan")
        total_in = sum(int(r.get("input_tokens") or 0) for r in ok)
        total_out = sum(int(r.get("output_tokens") or 0) for r in ok)
        ttfts = [float(r["ttft_ms"]) for r in ok]
        e2els = [float(r["e2el_ms"]) for r in ok]
        tpots = [float(r["tpot_ms"]) for r in ok if int(r.get("output_tokens") or 0) > 1
                 and r.get("tpot_ms") is not None]
        itls = [float(x) for r in ok for x in (r.get("itl_ms") or ())]
        queues = [float(r.get("queue_ms") or 0.0) for r in ok]
        good = _goodput(ok, goodput, dur) if goodput else None
        data: dict[str, Any] = dict(setup or {})
        data.update({
            "duration": duration_s,
            "completed": len(ok),
            "failed": len(failed),
            "total_input_tokens": total_in,
            "total_output_tokens": total_out,
            "request_throughput": len(ok) / dur,
            "request_goodput": good,
            "output_throughput": total_out / dur,
            "total_token_throughput": (total_in + total_out) / dur,
            "max_output_tokens_per_s": _max_tokens_per_s(ok),
            "max_concurrent_requests": _peak_concurrency(
                (int(r["start_ns"]), int(r["start_ns"] + float(r["e2el_ms"]) * 1e6)) for r in ok),
            "rtfx": 0.0,  # vLLM's audio real-time factor: no audio here
        })
        for metric, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els),
                               ("client_queue_time", queues)):
            _stats_into(data, metric, values, percentiles)
        builds = [float(r["build_ms"]) for r in recs if r.get("build_ms") is not None]
        if builds:
            _stats_into(data, "prompt_build", builds, percentiles)
            data["max_prompt_build_ms"] = max(builds)
        if any(r.get("turn") is not None for r in recs):
            data["ttft_by_turn"] = ttft_by_turn(ok, percentiles)
        kinds, examples = _errors_by_kind(failed)
        data["cancelled"] = len(cancelled)
        data["errors_by_kind"] = kinds
        data["error_examples"] = examples
        block = {"source": "kvgate", "schema": 1, "percentiles": list(percentiles),
                 "goodput_slo_ms": dict(goodput) if goodput else None}
        block.update(extra or {})
        data["kvgate"] = block
        for k, v in list(data.items()):
            if isinstance(v, float) and math.isnan(v):
                data[k] = None
        return cls(data, "kvgate")

    @classmethod
    def from_vllm_result(cls, path: Path) -> Summary:
        """Import a ``vllm bench serve --save-result`` JSON file (the last object of an
        ``--append-result`` file). Detailed arrays, when saved, become records:
        see ``records_from_vllm``."""
        data = _read_json(path)
        missing = [k for k in ("completed", "duration", "total_input_tokens", "request_throughput")
                   if k not in data]
        if missing:
            raise LoadInputError(f"{path}: not a vllm bench serve result: missing key(s) {', '.join(missing)}")
        for k in ("completed", "duration"):
            if not isinstance(data[k], (int, float)) or isinstance(data[k], bool):
                raise LoadInputError(f"{path}: key {k!r}: expected a number, got {data[k]!r}")
        out = dict(data)
        if "failed" not in out:
            errors = out.get("errors")
            out["failed"] = sum(1 for e in errors if e) if isinstance(errors, list) else None
        out["kvgate"] = {"source": "vllm", "schema": 1, "imported_from": str(path)}
        return cls(out, "vllm", path)


def records_from_vllm(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per-request records from a vLLM result saved with ``--save-detailed`` (seconds -> ms)."""
    ttfts = data.get("ttfts")
    if not isinstance(ttfts, list):
        return []
    n = len(ttfts)

    def col(name: str, default: Any) -> list[Any]:
        v = data.get(name)
        return v if isinstance(v, list) and len(v) == n else [default] * n

    itls, lats, ins = col("itls", []), col("latencies", 0.0), col("input_lens", 0)
    outs, errs, starts = col("output_lens", 0), col("errors", ""), col("start_times", 0.0)
    queues = col("queue_times", 0.0)
    out = []
    for i in range(n):
        ok = not errs[i]
        itl = [x * 1000.0 for x in itls[i] or ()]
        ttft = ttfts[i] * 1000.0 if ok else None
        e2el = lats[i] * 1000.0 if ok else None
        tpot = (e2el - ttft) / (outs[i] - 1) if ok and e2el is not None and ttft is not None and outs[i] > 1 else None
        out.append({"request_id": f"vllm-{i:06d}", "phase": "measure", "status": "ok" if ok else "error",
                    "error_kind": None if ok else "vllm_error", "error": errs[i] or None,
                    "start_ns": int((starts[i] or 0.0) * 1e9), "scheduled_ns": None,
                    "queue_ms": (queues[i] or 0.0) * 1000.0, "ttft_ms": ttft, "itl_ms": itl, "tpot_ms": tpot,
                    "e2el_ms": e2el, "input_tokens": ins[i], "output_tokens": outs[i], "workload": "vllm-import"})
    return out


def _read_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LoadInputError(f"{path}: {exc.strerror or exc}") from None
    try:
        obj = json.loads(text)
    except ValueError:
        # --append-result writes one JSON object per line: take the last complete one
        objs = []
        for no, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    objs.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise LoadInputError(f"{path}:{no}: not JSON ({exc.msg})") from None
        if not objs:
            raise LoadInputError(f"{path}: empty file") from None
        obj = objs[-1]
    if not isinstance(obj, dict):
        raise LoadInputError(f"{path}: expected a JSON object")
    return obj
