"""Window summaries of soak records: the fast field reader agrees with json on every layout it
accepts, and falls back to json on any other; torn lines are skipped; windows are in order."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from harness.load.client import RequestResult
from harness.load.records import make_record
from harness.load.soakwindow import fast_fields, iter_window_records, summarise_files, summarise_records
from harness.load.spec import RequestSpec

KEYS = ("status", "error_kind", "ttft_ms", "tpot_ms", "e2el_ms", "input_tokens", "output_tokens")


def line(res: RequestResult) -> bytes:
    spec = RequestSpec(res.request_id, "p", 10, 4, meta={"workload": "long-doc", "doc": 3})
    rec = make_record(res, spec, phase="soak", queue_ms=0.5, scheduled_ns=None)
    return (json.dumps(rec, separators=(",", ":")) + "\n").encode()


def records() -> list[bytes]:
    return [
        line(RequestResult("a", "ok", 1, 2, ttft_ms=12.5, tpot_ms=3.25, itl_ms=[3.0, 3.5], input_tokens=10,
                           output_tokens=4)),
        line(RequestResult("b", "error", 1, 2, error_kind="http", http_status=503, input_tokens=10,
                           error='upstream said "ttft_ms":1,"itl_ms":[9],"tpot_ms":2, "input_tokens":5 ]')),
        line(RequestResult("c", "cancelled", 1, 2, error_kind="cancelled", error="soak ended")),
        line(RequestResult("d", "ok", 1, 2, ttft_ms=0.0005, tpot_ms=None, itl_ms=[], input_tokens=10,
                           output_tokens=1)),
    ]


def test_fast_fields_match_json_even_with_tricky_error_text() -> None:
    for raw in records():
        full = json.loads(raw)
        assert fast_fields(raw) == {k: full[k] for k in KEYS}


def test_other_layouts_fall_back_to_json(tmp_path: Path) -> None:
    other = b'{"output_tokens": 2, "status": "ok", "ttft_ms": 7.0}\n'
    assert fast_fields(other) is None
    p = tmp_path / "w000001.jsonl.gz"
    with gzip.open(p, "wb") as fh:
        fh.write(b"".join(records()) + other + b'{"status": "ok", "ttft')  # torn last line
    got = list(iter_window_records(p, itl=False))
    assert len(got) == 5 and got[-1]["ttft_ms"] == 7.0


def test_summaries_from_files_equal_the_in_memory_ones(tmp_path: Path) -> None:
    lines = records()
    jobs = []
    for i in range(3):
        p = tmp_path / f"w{i + 1:06d}.jsonl.gz"
        with gzip.open(p, "wb") as fh:
            fh.write(b"".join(lines[: i + 2]))
        jobs.append((i + 1, str(p), 100.0 * i, 100.0 * (i + 1)))
    direct = [summarise_records(i + 1, [json.loads(x) for x in lines[: i + 2]], 100.0 * i, 100.0 * (i + 1))
              for i in range(3)]
    assert summarise_files(jobs, workers=1) == direct
    assert summarise_files(jobs, workers=2) == direct
    w = direct[2]
    assert (w["requests"], w["ok"], w["failed"], w["cancelled"], w["failures"]) == (4, 2, 1, 1, {"http": 1})
    assert w["output_tokens"] == 5 and w["throughput_tok_s"] == 5 / 100.0


def test_the_fast_reader_takes_every_make_record_layout_open_loop_and_text_included() -> None:
    # an open-loop record (scheduled_ns set), a timeout without HTTP status, a kept text: all read
    # by the fast path (a silent fall-back to json would keep the figures but lose the speed)
    res = RequestResult("e", "ok", 5, 9, ttft_ms=4.0, tpot_ms=1.5, itl_ms=[1.0, 2.0], input_tokens=3,
                        output_tokens=3, text='he said "hi"\n')
    spec = RequestSpec("e", "p", 3, 3, meta={"workload": "trace"})
    for rec in (make_record(res, spec, phase="soak", queue_ms=0.0, scheduled_ns=123456789),
                make_record(RequestResult("f", "timeout", 1, 2, error_kind="timeout", error="read timed out"),
                            spec, phase="soak", queue_ms=2.5, scheduled_ns=7)):
        raw = (json.dumps(rec, separators=(",", ":")) + "\n").encode()
        assert fast_fields(raw) == {k: rec[k] for k in KEYS}


def _with_instance(raw: bytes, inst: int) -> bytes:
    rec = json.loads(raw)
    rec["instance"] = inst  # as the soak adds it: the last key
    return (json.dumps(rec, separators=(",", ":")) + "\n").encode()


def test_records_of_several_instances_give_per_instance_figures_on_every_path(tmp_path: Path) -> None:
    lines = [_with_instance(raw, i % 2) for i, raw in enumerate(records())]
    for raw in lines:
        full = json.loads(raw)
        assert fast_fields(raw) == {**{k: full[k] for k in KEYS}, "instance": full["instance"]}
    p = tmp_path / "w000001.jsonl.gz"
    with gzip.open(p, "wb") as fh:
        fh.write(b"".join(lines))
    direct = summarise_records(1, [json.loads(x) for x in lines], 0.0, 10.0)
    assert summarise_files([(1, str(p), 0.0, 10.0)]) == [direct]
    # a: ok on 0 (4 tokens, TTFT 12.5); b: error on 1; c: cancelled on 0; d: ok on 1 (1 token)
    assert direct["instances"] == {
        "0": {"ok": 1, "ttft_p50_ms": 12.5, "throughput_tok_s": 0.4},
        "1": {"ok": 1, "ttft_p50_ms": json.loads(lines[3])["ttft_ms"], "throughput_tok_s": 0.1}}
    # one instance only (no ``instance`` key): no per-instance figures
    assert "instances" not in summarise_records(1, [json.loads(x) for x in records()], 0.0, 10.0)
