"""Write-path overhead: the candidate's populate pass against the reference arm's first pass."""

from __future__ import annotations

import json
from pathlib import Path

from harness.pipelines.g3.compare import write_overhead_measured


def _populate(base: Path, arm: str, conc: int, rep: int, seconds: float) -> None:
    d = base / "evidence" / "sweep" / arm / f"c{conc}" / f"rep{rep}" / "populate"
    d.mkdir(parents=True)
    (d / "point-summary.json").write_text(json.dumps({"duration": seconds, "completed": 6}))


def test_ratio_of_mean_populate_durations_per_concurrency(tmp_path: Path) -> None:
    g3, g2 = tmp_path / "G3", tmp_path / "G2"
    for rep, secs in ((1, 1.2), (2, 1.4)):
        _populate(g3, "candidate", 2, rep, secs)
    for rep, secs in ((1, 1.0), (2, 1.0)):
        _populate(g2, "baseline", 2, rep, secs)
    out = write_overhead_measured(g3, "candidate", g2, "baseline", [2, 4], 2)
    assert abs(out["c2"]["value"] - 1.3) < 1e-12 and out["c2"]["text"] == "1.00 s -> 1.30 s"
    assert out["c4"]["value"] is None and "candidate" in out["c4"]["detail"]
