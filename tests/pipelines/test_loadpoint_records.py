"""A point's TTFT samples from its record files: error records and duplicate request ids (issue 52)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.pipelines.shared.loadpoint import ttfts_from


def _write(path: Path, recs: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def _rec(rid: str, ttft: float, status: str = "ok") -> dict[str, object]:
    return {"request_id": rid, "phase": "measure", "status": status, "ttft_ms": ttft, "e2el_ms": ttft + 50.0,
            "tpot_ms": 1.0, "itl_ms": [1.0]}


def test_a_ttft_of_zero_or_nan_is_no_sample(tmp_path: Path) -> None:
    f = _write(tmp_path / "records.jsonl", [_rec("r1", 80.0), _rec("r2", 0.0), _rec("r3", float("nan")),
                                            _rec("r4", -2.0), _rec("r5", 90.0), _rec("r6", 5.0, "error")])
    ttfts, dups = ttfts_from([f])
    assert ttfts == [80.0, 90.0] and dups == []


def test_duplicate_request_ids_across_a_points_record_files_are_named(tmp_path: Path) -> None:
    one = _write(tmp_path / "i0.jsonl", [_rec("r1", 80.0), _rec("r2", 85.0)])
    two = _write(tmp_path / "i1.jsonl", [_rec("r3", 80.0), _rec("r2", 85.0),
                                         {**_rec("r3", 70.0), "phase": "warmup"}])
    ttfts, dups = ttfts_from([one, two])
    assert dups == ["r2"] and len(ttfts) == 4
