"""Record files: appended line by line, torn tails tolerated, bad lines located."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.load.client import RequestResult
from harness.load.errors import LoadInputError
from harness.load.records import (
    INVALID_TIMING,
    RECORD_KEYS,
    RecordWriter,
    classify_timing,
    duplicate_ids,
    make_record,
    read_records,
    split_complete_lines,
)
from harness.load.spec import RequestSpec
from harness.load.summary import Summary


def test_make_record_has_every_key_and_keeps_workload_keys_apart() -> None:
    res = RequestResult("r1", "ok", 10, 20, ttft_ms=1.23456789, itl_ms=[0.5, 0.25], e2el_ms=2.0, tpot_ms=0.38,
                        input_tokens=4, output_tokens=3, http_status=200)
    spec = RequestSpec("r1", "a b c d", 4, 3, meta={"workload": "random", "status": "clash", "group": 2})
    rec = make_record(res, spec, phase="measure", queue_ms=0.1, scheduled_ns=None)
    assert set(RECORD_KEYS) <= set(rec)
    assert rec["status"] == "ok" and rec["meta_status"] == "clash" and rec["group"] == 2
    assert rec["ttft_ms"] == 1.2346 and rec["itl_ms"] == [0.5, 0.25]
    assert json.dumps(rec).isascii()  # byte offsets of pulled records rely on ASCII lines


def test_writer_appends_complete_lines_and_reader_skips_a_torn_tail(tmp_path: Path) -> None:
    f = tmp_path / "r.jsonl"
    with RecordWriter(f) as w:
        w.write({"request_id": "a", "text": "\u00e9"})
        w.write({"request_id": "b"})
    with RecordWriter(f) as w:  # a second writer appends
        w.write({"request_id": "c"})
    data = f.read_bytes()
    assert data.isascii() and data.count(b"\n") == 3
    f.write_bytes(data + b'{"request_id": "d", "tru')
    assert [r["request_id"] for r in read_records(f)] == ["a", "b", "c"]
    recs, consumed = split_complete_lines(data + b'{"x"')
    assert len(recs) == 3 and consumed == len(data)
    f.write_bytes(b'{"a": 1}\nnot json\n{"b": 2}\n')
    with pytest.raises(LoadInputError, match=r"r\.jsonl:2"):
        read_records(f)
    with pytest.raises(LoadInputError):
        read_records(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("field,value", [("ttft_ms", 0.0), ("ttft_ms", -3.0), ("ttft_ms", float("nan")),
                                         ("ttft_ms", float("inf")), ("e2el_ms", 0.0), ("tpot_ms", -1.0),
                                         ("itl_ms", [0.5, float("nan")])])
def test_a_time_of_zero_negative_nan_or_infinite_makes_an_ok_request_an_error_record(
        tmp_path: Path, field: str, value: object) -> None:
    fields = {"ttft_ms": 12.0, "itl_ms": [0.5], "e2el_ms": 20.0, "tpot_ms": 4.0, field: value}
    res = RequestResult("r1", "ok", 10, 20, input_tokens=4, output_tokens=3, http_status=200, **fields)  # type: ignore[arg-type]
    rec = make_record(res, RequestSpec("r1", "a b c d", 4, 3), phase="measure", queue_ms=0.0, scheduled_ns=None)
    assert rec["status"] == "error" and rec["error_kind"] == INVALID_TIMING
    assert field.split("[")[0] in rec["error"] and "no measurement" in rec["error"]
    # a record file written by another version (or a node) is classified the same way when read
    raw = {"request_id": "r2", "phase": "measure", "status": "ok", "ttft_ms": 12.0, "e2el_ms": 20.0,
           "tpot_ms": 4.0, "itl_ms": [0.5], field: value}
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps(raw) + "\n")
    (got,) = read_records(f)
    assert got["status"] == "error" and got["error_kind"] == INVALID_TIMING


def test_an_honest_record_stays_ok_and_a_tpot_of_zero_is_a_one_token_request() -> None:
    ok = {"status": "ok", "ttft_ms": 0.5, "e2el_ms": 0.5, "tpot_ms": 0.0, "itl_ms": [0.0]}
    assert classify_timing(ok) is ok
    failed = {"status": "error", "ttft_ms": None}
    assert classify_timing(failed) is failed


def test_an_invalid_timing_is_counted_and_shown_among_the_failures() -> None:
    recs = [{"request_id": f"r{i}", "phase": "measure", "status": "ok", "start_ns": i * 10**6, "ttft_ms": 10.0 + i,
             "e2el_ms": 20.0 + i, "tpot_ms": 1.0, "itl_ms": [1.0], "input_tokens": 4, "output_tokens": 2}
            for i in range(4)]
    recs[2]["ttft_ms"] = 0.0
    summary = Summary.from_records([classify_timing(r) for r in recs], duration_s=1.0).data
    assert summary["completed"] == 3 and summary["failed"] == 1
    assert summary["errors_by_kind"] == {INVALID_TIMING: 1}
    assert summary["median_ttft_ms"] == 11.0  # of 10, 11 and 13: the zero is no sample


def test_duplicate_request_ids_are_named() -> None:
    recs = [{"request_id": "a"}, {"request_id": "b"}, {"request_id": "a"}, {"request_id": "b", "phase": "warmup"},
            {"request_id": "c"}, {"request_id": "c"}]
    assert duplicate_ids(recs) == ["a", "c"]
    assert duplicate_ids([{"request_id": "a"}, {"request_id": "b"}]) == []
