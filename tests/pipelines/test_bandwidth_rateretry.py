"""A sweep point's rate check: an INCONCLUSIVE fio (rounds that never settled on a busy machine) is
measured once more and the second decides; a FAIL (the kernel did not deliver) is never retried."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from harness.pipelines.bandwidth import points
from harness.records.outcome import CheckResult, Verdict


def _check(v: Verdict) -> CheckResult:
    return CheckResult(id="provisioned_read", description="rate delivered", metric="read_of_provisioned",
                       comparator=">=", severity="blocker", statistic="interval", verdict=v, reason=f"was {v.value}")


@pytest.mark.parametrize("first, second, calls, decided", [
    (Verdict.INCONCLUSIVE, Verdict.PASS, 2, Verdict.PASS),
    (Verdict.INCONCLUSIVE, Verdict.INCONCLUSIVE, 2, Verdict.INCONCLUSIVE),
    (Verdict.FAIL, Verdict.PASS, 1, Verdict.FAIL),  # never a second try at a rate the kernel missed
    (Verdict.PASS, Verdict.FAIL, 1, Verdict.PASS),
])
def test_only_an_inconclusive_rate_is_measured_again(monkeypatch: pytest.MonkeyPatch, first: Verdict,
                                                     second: Verdict, calls: int, decided: Verdict) -> None:
    keys: list[str] = []
    answers = iter([first, second])

    def fake(ctx: Any, pr: Any, target: Any, key: str) -> tuple[dict[str, Any], CheckResult]:
        keys.append(key)
        return {"value": 1.0}, _check(next(answers))

    monkeypatch.setattr(points, "_fio_rate", fake)
    pr = SimpleNamespace(notes=[])
    _, rate = points._verified_rate(SimpleNamespace(), pr, SimpleNamespace(), 3, 37.75e6)
    assert rate.verdict is decided and keys == ["fio/bw3", "fio/bw3-again"][:calls]
    assert len(pr.notes) == calls - 1 and all("measured it again" in n for n in pr.notes)
    # the rate's error text follows the deciding check: nothing but PASS is a point
    assert (points.rate_error(rate) is None) == (decided is Verdict.PASS)
