"""How the nightly names a regression: last good and first bad run, what changed between them."""

from __future__ import annotations

from harness.gates.regression import ChangePoint, Status, WindowComparison
from harness.pipelines.nightly.run import _describe, _first_bad
from harness.store.historydb import StoredRun


def _run(i: int, commit: str, versions: dict[str, dict[str, str]] | None = None) -> StoredRun:
    return StoredRun(id=i + 1, run_key=f"k{i}", series="s", kind="nightly", started_at=f"t{i:02d}", campaign=f"n{i}",
                     git_commit=commit, kvgate_version="0.1", nodes=["n1"], versions=versions or {"n1": {"vllm": "1"}})


def _cp(index: int, status: Status = Status.REGRESSION) -> ChangePoint:
    return ChangePoint(index=index, before_median=1.0, after_median=1.2, effect=0.2, p_value=0.001, status=status)


def test_first_bad_is_this_run_unless_a_recent_change_point_started_it() -> None:
    assert _first_bad(20, 10, [], Status.REGRESSION) == 20
    assert _first_bad(20, 10, [_cp(17)], Status.REGRESSION) == 17
    assert _first_bad(20, 10, [_cp(3)], Status.REGRESSION) == 20  # long ago: not this change
    assert _first_bad(20, 10, [_cp(17, Status.IMPROVEMENT)], Status.REGRESSION) == 20
    assert _first_bad(20, 10, [_cp(17), _cp(19, Status.IMPROVEMENT)], Status.REGRESSION) == 20


def test_describe_names_runs_and_what_changed() -> None:
    history = [_run(i, "aaa") for i in range(10)] + [_run(10, "bbb", {"n1": {"vllm": "2"}})]
    this = {"id": None, "campaign": "tonight", "started_at": "t99", "git_commit": "bbb",
            "provenance": {"git_commit": "bbb", "kvgate_version": "0.1", "nodes": ["n1"],
                           "versions": {"n1": {"vllm": "2"}}}}
    c = WindowComparison(metric="m", status=Status.REGRESSION, better="lower", min_effect=0.05, effect=0.2,
                         effect_low=0.1, effect_high=0.3)
    d = _describe(c, history, 10, this, [_cp(10)])
    assert d["last_good"]["campaign"] == "n9" and d["first_bad"]["campaign"] == "n10"
    assert d["what_changed"] == ["kvgate commit: aaa -> bbb", "n1 vllm: 1 -> 2"]
    d = _describe(c, history[:10], 10, this, [])
    assert d["first_bad"]["campaign"] == "tonight" and d["last_good"]["campaign"] == "n9"
    assert d["what_changed"] == ["kvgate commit: aaa -> bbb", "n1 vllm: 1 -> 2"]


def test_an_unmeasured_sweep_is_not_run_never_absent() -> None:
    """The sweep crashed before any repetition: the profile's concurrencies still get their checks,
    NOT_RUN, so fio alone cannot make the night pass."""
    from harness.gates.regression import compare_to_window
    from harness.pipelines.nightly.run import _check, _sweep_metrics

    metrics = _sweep_metrics([2, 8], {}, "candidate")
    assert sorted(metrics) == ["candidate.c2.output_throughput", "candidate.c2.ttft_p50_ms",
                               "candidate.c8.output_throughput", "candidate.c8.ttft_p50_ms"]
    for name, m in metrics.items():
        c = compare_to_window(name, m["samples"], [[1.0, 2.0, 3.0]] * 5, better=m["better"], min_effect=0.05)
        assert _check(c, m["unit"]).verdict.value == "NOT_RUN"
