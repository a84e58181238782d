"""Probe results as leaves of the measured-results tree the gate engine evaluates (metric paths in
``harness/catalog.py``): ``{"value", "text", "detail", "evidence"}``, evidence paths relative to the
gate directory. A figure that cannot be trusted as storage (a read that may include cached data)
gets ``value: None`` with the reason, which the gate reports as NOT_RUN rather than a pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from harness.probes.checkpoint import CheckpointResult
from harness.probes.drain import DrainRecord
from harness.probes.fio_rounds import RoundsRecord
from harness.probes.fio_run import FioProbeResult
from harness.probes.modelload import ModelLoadResult
from harness.probes.steady import STEADY_WINDOW, SteadyState
from harness.units import UnitKind, format_quantity

# catalog metric name under ``...fio.`` -> (job set, direction)
FIO_METRICS: dict[str, tuple[str, str]] = {
    "seq_read_bw": ("seq-read", "read"),
    "seq_write_bw": ("seq-write", "write"),
    "rand_read_bw": ("rand-read", "read"),
    "mixed_read_bw": ("mixed", "read"),
    "mixed_write_bw": ("mixed", "write"),
}

Leaf = dict[str, object]


def _rel(paths: Sequence[Path], base: Optional[Path]) -> list[str]:
    out = []
    for p in paths:
        if base is not None:
            try:
                out.append(str(p.resolve().relative_to(base.resolve())))
                continue
            except ValueError:
                pass
        out.append(str(p))
    return out


def fio_leaf(
    result: FioProbeResult, job_set: str, direction: str, base: Optional[Path] = None
) -> Optional[Leaf]:
    """The bandwidth of one job set and direction; None when that set was not run (path absent)."""
    js = result.job_sets.get(job_set)
    if js is None:
        return None
    evidence = _rel([result.raw_output, result.jobfile], base)
    bw = js.read_bw_bytes if direction == "read" else js.write_bw_bytes
    if bw is None:
        return {
            "value": None,
            "text": "-",
            "evidence": evidence,
            "detail": f"fio job set {job_set} moved no data in direction {direction}",
        }
    if js.rounds is not None:
        files = [*js.rounds.window_outputs, *([js.rounds.jobfile] if js.rounds.jobfile else [])]
        return rounds_leaf(result, js.rounds, job_set, direction, bw, _rel(files, base), errors=js.errors)
    steady = js.steady_state
    steady_text = (
        "steady state not judged"
        if steady is None
        else f"steady state {'reached' if steady.steady else 'NOT reached'} ({steady.reason})"
    )
    return {
        "value": bw,
        "text": format_quantity(bw, UnitKind.BANDWIDTH),
        "detail": f"fio {job_set} {direction} on {result.node}/{result.target}, engine {result.engine}, "
        f"direct=1, {result.fio_version or 'fio'}; {steady_text}; errors {js.errors}",
        "evidence": evidence,
    }


def unsignable(record: RoundsRecord) -> Optional[str]:
    """Why a figure measured in rounds cannot decide a check (it is INCONCLUSIVE), or None."""
    reasons = []
    if not record.steady.steady:
        reasons.append(f"steady state NOT reached in {record.rounds} rounds (limit {record.max_rounds}): "
                       f"{record.steady.reason}")
    if not record.drain.drained:
        reasons.append(f"measured before the node's writes drained ({record.drain.describe()})")
    if record.cache_problem:
        reasons.append(record.cache_problem)
    return "; ".join(reasons) or None


def rounds_leaf(result: FioProbeResult, record: RoundsRecord, job_set: str, direction: str, bw: float,
                evidence: list[str], *, errors: int = 0) -> Leaf:
    """A bandwidth measured in rounds: the median of the steady-state window, the window's rounds as
    samples (the gate's interval), and ``inconclusive`` with the reason when the figure cannot be
    signed (never steady, not drained, working set within the cache)."""
    window = list(record.window(direction))
    tier = " (a RAM tier, declared kind: memory, measured buffered)" if record.memory_tier else ""
    rounds = ", ".join(format_quantity(v, UnitKind.BANDWIDTH) for v in record.series.get(direction, ()))
    leaf: Leaf = {
        "value": bw,
        "text": format_quantity(bw, UnitKind.BANDWIDTH) + tier,
        "samples": {"kind": "percentile", "x": window, "q": 50},
        "detail": f"fio {job_set} {direction} on {result.node}/{result.target}{tier}, engine {result.engine}, "
        f"{'buffered' if record.memory_tier else 'O_DIRECT'}, {result.fio_version or 'fio'}; median of the last "
        f"{len(window)} of {record.rounds} rounds of "
        f"{record.round_s:g} s ({rounds}); steady state {'reached' if record.steady.steady else 'NOT reached'} "
        f"({record.steady.reason}); {record.precondition}; writes {record.drain.describe()}; "
        f"{record.cache_note}; backing {record.backing}; {record.buffers or 'I/O buffers not recorded'}; "
        f"errors {errors}",
        "evidence": evidence,
        "protocol": record.to_json(),
    }
    why = unsignable(record)
    if why:
        leaf["inconclusive"] = why
    return leaf


def fio_tree(results: Sequence[FioProbeResult], base: Optional[Path] = None) -> dict[str, object]:
    """``nodes.<node>.storage.<target>.fio.<metric>`` for every result (the G1 subtree)."""
    nodes: dict[str, object] = {}
    for r in results:
        fio: dict[str, object] = {}
        for metric, (job_set, direction) in FIO_METRICS.items():
            leaf = fio_leaf(r, job_set, direction, base)
            if leaf is not None:
                fio[metric] = leaf
        node = nodes.setdefault(r.node, {"storage": {}})
        node["storage"][r.target] = {"fio": fio}  # type: ignore[index]
    return {"nodes": nodes}


def checkpoint_leaf(result: CheckpointResult, base: Optional[Path] = None) -> Leaf:
    """Sustained checkpoint write bandwidth (``*.checkpoint.write_bw``): the median round of the
    steady window, with the window's rounds as samples (the gate's interval)."""
    return _in_rounds(_checkpoint_point(result, base), result.rounds, result.steady, result.drain, "snapshot writes")


def _in_rounds(leaf: Leaf, rounds: tuple[float, ...], steady: Optional[SteadyState], drain: Optional[DrainRecord],
               what: str) -> Leaf:
    """A probe's leaf measured in rounds: the steady window's rounds as the samples of its interval,
    every round and the steady state in the detail, and INCONCLUSIVE when the rounds never settled or
    the node's writes had not drained before them."""
    if not rounds or steady is None:
        return leaf
    window = list(rounds[-STEADY_WINDOW:])
    leaf["samples"] = {"kind": "percentile", "x": window, "q": 50}
    shown = ", ".join(format_quantity(v, UnitKind.BANDWIDTH) for v in rounds)
    state = "reached" if steady.steady else "NOT reached"
    leaf["detail"] = (f"{leaf['detail']}; median of the last {len(window)} of {len(rounds)} {what} ({shown}); "
                      f"steady state {state} ({steady.reason})" + (f"; writes {drain.describe()}" if drain else ""))
    why = [] if steady.steady else [f"steady state NOT reached in {len(rounds)} {what}: {steady.reason}"]
    if drain is not None and not drain.drained:
        why.append(f"measured before the node's writes drained ({drain.describe()})")
    if why:
        leaf["inconclusive"] = "; ".join(why)
    return leaf


def _checkpoint_point(result: CheckpointResult, base: Optional[Path]) -> Leaf:
    tier = " (a RAM tier, declared kind: memory)" if result.memory_tier else ""
    return {
        "value": result.write_bw_bytes,
        "text": format_quantity(result.write_bw_bytes, UnitKind.BANDWIDTH) + tier,
        "detail": f"{format_quantity(result.total_bytes, UnitKind.BYTES)} as {result.files} files by "
        f"{result.writers} writers in {result.total_s:.3f} s, every file and the directory fsync'd, "
        f"on {result.node}/{result.target}{tier}",
        "evidence": _rel([result.evidence], base),
    }


def modelload_leaf(result: ModelLoadResult, base: Optional[Path] = None) -> Leaf:
    """Model load read bandwidth (``*.modelload.read_bw``), in rounds like the checkpoint write; None when
    cached reads may be in it."""
    measured = format_quantity(result.read_bw_bytes, UnitKind.BANDWIDTH)
    if result.may_include_cached:
        return {
            "value": None,
            "text": f"{measured} (may include cached reads)",
            "detail": f"not counted as storage bandwidth: {result.how}",
            "evidence": _rel([result.evidence], base),
        }
    leaf: Leaf = {
        "value": result.read_bw_bytes,
        "text": measured,
        "detail": f"{format_quantity(result.total_bytes, UnitKind.BYTES)} in {result.files} files, "
        f"{result.readers} readers, {result.total_s:.3f} s on {result.node}; {result.how}",
        "evidence": _rel([result.evidence], base),
    }
    return _in_rounds(leaf, result.rounds, result.steady, result.drain, "cold reads")
