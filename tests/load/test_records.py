"""Record files: appended line by line, torn tails tolerated, bad lines located."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.load.client import RequestResult
from harness.load.errors import LoadInputError
from harness.load.records import RECORD_KEYS, RecordWriter, make_record, read_records, split_complete_lines
from harness.load.spec import RequestSpec


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
