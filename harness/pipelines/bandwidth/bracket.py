"""The answer of a bandwidth sweep, from its points' verdicts alone (pure): the least provisioned read
rate at which a G3 blocker still PASSes, bracketed by the lowest rate that passed and the highest
that did not, and the next rate to bisect at.

Only a PASS counts as passing. A point's verdict is what G3 would say with that blocker and G3's
cold-restore validity blockers at that rate (``harness.gates.verdict.decide``), so an INCONCLUSIVE,
NOT_RUN or ERROR point is never a PASS, and nothing is interpolated between points: the upper end of
a bracket is always a rate that was measured and PASSed, with every measured rate above it PASS too.
A point whose rate the kernel did not deliver (an error point) and a point that decided nothing
(NOT_RUN, ERROR) are left out of the bracket; they are shown in the curve as what they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

PASS = "PASS"
# verdicts that measured the blocker at the rate: PASS, or measured and not PASS
DECIDED = frozenset({"PASS", "FAIL", "INCONCLUSIVE"})


def _decided(points: Sequence[Mapping[str, Any]], check: str) -> list[tuple[float, str]]:
    """(rate, verdict) of every point that measured ``check`` at a delivered rate, highest rate first."""
    out = [(float(p["provisioned_read_bps"]), str((p.get("verdicts") or {}).get(check)))
           for p in points if not p.get("error")]
    return sorted(((r, v) for r, v in out if v in DECIDED), key=lambda rv: -rv[0])


def bracket(points: Sequence[Mapping[str, Any]], check: str) -> dict[str, Any]:
    """``{"status", "lowest_pass_bps", "highest_not_pass_bps", "relative_width"}`` for ``check``.

    ``lowest_pass_bps``: the lowest rate of the unbroken run of PASS points from the highest rate
    down; ``highest_not_pass_bps``: the first decided point below it (FAIL or INCONCLUSIVE).
    status: ``all_pass`` (every decided point PASSed: the answer is at most the lowest rate),
    ``none_pass`` (no point PASSed), ``bracketed`` (PASS above a FAIL, and no PASS below that FAIL),
    ``inconclusive`` (the point below the PASS run is INCONCLUSIVE, a PASS lies below a point that
    did not pass, the highest rate did not pass while a lower one did, or nothing was decided)."""
    decided = _decided(points, check)
    out: dict[str, Any] = {"status": "inconclusive", "lowest_pass_bps": None, "highest_not_pass_bps": None,
                           "relative_width": None}
    if not decided:
        return out
    run = 0
    while run < len(decided) and decided[run][1] == PASS:
        run += 1
    if run == 0:
        out["status"] = "none_pass" if all(v != PASS for _, v in decided) else "inconclusive"
        out["highest_not_pass_bps"] = decided[0][0]
        return out
    out["lowest_pass_bps"] = decided[run - 1][0]
    if run == len(decided):
        out["status"] = "all_pass"
        return out
    low_rate, low_verdict = decided[run]
    out["highest_not_pass_bps"] = low_rate
    out["relative_width"] = (out["lowest_pass_bps"] - low_rate) / low_rate
    below = [v for _, v in decided[run + 1:]]
    out["status"] = "bracketed" if low_verdict == "FAIL" and PASS not in below else "inconclusive"
    return out


def next_rate(points: Sequence[Mapping[str, Any]], check: str, width: float) -> Optional[float]:
    """The rate to measure next (the midpoint of the bracket), or None when the bracket is within
    ``width`` of its lower end, there is no bracket to narrow, or the midpoint was already tried
    (an error point there: trying again would only repeat it)."""
    b = bracket(points, check)
    hi, lo = b["lowest_pass_bps"], b["highest_not_pass_bps"]
    if hi is None or lo is None or b["relative_width"] is None or b["relative_width"] <= width:
        return None
    mid = (float(hi) + float(lo)) / 2
    if any(abs(float(p["provisioned_read_bps"]) - mid) <= 0.01 * mid for p in points):
        return None
    return mid
