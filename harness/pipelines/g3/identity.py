"""Does the restore path return the right bytes? Greedy outputs compared across arms.

A tier that serves corrupted KV makes TTFT fall and answers wrong. Every measured request is
sent with temperature 0 and its text kept in the records; per point, *every* measured candidate
request with text, pooled over the repetitions, is compared with the reference arm's output for
the same request id (the same prompt) over the first ``tokens`` tokens (words; the gate file's
``compared_tokens`` of the ``output_identity`` check, default ``TOKENS``). The reference is the
recompute arm when the profile has one, else the baseline arm.

The leaf is the divergence rate ``k / n`` with binomial samples, so the gate decides on an exact
(Clopper-Pearson) interval: FAIL when the whole interval is above the allowed rate (the gate
file's threshold), PASS when it is below, INCONCLUSIVE between. GPU kernels are not always batch
invariant, so an honest candidate may diverge on a few requests: 1 in 80 at an allowed 10% passes.
Comparing a fixed handful of request ids (the old design) missed a tier that corrupted only the
later documents' chunks, and turned one divergence in 8 into a FAIL. The first-divergence token of
every differing request is recorded (``first_divergence``) and the first few are named.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from harness.config.gatespec import IDENTITY_METRIC, GateSpec
from harness.load import read_records
from harness.pipelines.shared.sweepdata import Repetition, Sweep, measurement, point_key

__all__ = ["TOKENS", "compared_tokens", "outputs", "output_identity_measured"]

TOKENS = 16


def outputs(rep: Repetition, base: Path, tokens: int = TOKENS) -> dict[str, list[str]]:
    """request id -> the first ``tokens`` words of its text, for successful measured requests."""
    out: dict[str, list[str]] = {}
    for rel in rep.evidence:
        path = base / rel
        if not path.is_file():
            continue
        for rec in read_records(path):
            if rec.get("phase", "measure") != "measure" or rec.get("status") != "ok":
                continue
            text = rec.get("text")
            if isinstance(text, str):
                out[str(rec.get("request_id"))] = text.split()[:tokens]
    return out


def compared_tokens(spec: GateSpec) -> int:
    """The gate file's ``compared_tokens`` of its output identity check, else ``TOKENS``."""
    for check in spec.checks:
        if check.metric.startswith(IDENTITY_METRIC) and check.compared_tokens is not None:
            return check.compared_tokens
    return TOKENS


def _first_divergence(a: Sequence[str], b: Sequence[str]) -> Optional[int]:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _reference(reference: Sweep, ref_base: Path, conc: int, tokens: int) -> dict[str, list[str]]:
    ref: dict[str, list[str]] = {}
    for r in reference.get(conc, []):
        for rid, words in outputs(r, ref_base, tokens).items():
            ref.setdefault(rid, words)
    return ref


def _compare_point(reps: Sequence[Repetition], cand_base: Path, ref: dict[str, list[str]],
                   tokens: int) -> tuple[int, int, int, list[str], list[int]]:
    """(compared, diverged, without a reference, notes per repetition, first-divergence positions)."""
    compared = diverged = unmatched = 0
    notes: list[str] = []
    positions: list[int] = []
    for r in reps:
        got = outputs(r, cand_base, tokens)
        ids = sorted(rid for rid in got if rid in ref)
        unmatched += len(got) - len(ids)
        diff = [(rid, _first_divergence(got[rid], ref[rid])) for rid in ids if got[rid] != ref[rid]]
        compared += len(ids)
        diverged += len(diff)
        positions += [pos if pos is not None else 0 for _, pos in diff]
        if diff:
            shown = ", ".join(f"{rid} at token {pos}" for rid, pos in diff[:3])
            more = f" and {len(diff) - 3} more" if len(diff) > 3 else ""
            notes.append(f"rep{r.repetition}: {len(diff)} of {len(ids)} differ ({shown}{more})")
    return compared, diverged, unmatched, notes, positions


def output_identity_measured(candidate: Sweep, cand_base: Path, reference: Sweep, ref_base: Path,
                             concurrencies: Sequence[int], ref_name: str, *,
                             tokens: int = TOKENS) -> dict[str, Any]:
    """The ``compare.output_divergence`` subtree: per concurrency, every measured candidate request
    with text, pooled over repetitions, against the reference's output for the same request id:
    the divergence rate with its binomial samples (``k`` diverged of ``n`` compared)."""
    out: dict[str, Any] = {}
    for conc in concurrencies:
        key = point_key(conc)
        ref = _reference(reference, ref_base, conc, tokens)
        reps = candidate.get(conc, [])
        if not reps or not ref:
            side = "candidate" if not reps else f"reference arm {ref_name!r}"
            out[key] = measurement(None, detail=f"no output text recorded for the {side} at concurrency {conc}")
            continue
        n, k, unmatched, notes, positions = _compare_point(reps, cand_base, ref, tokens)
        if n == 0:
            out[key] = measurement(None, detail=f"no candidate request at concurrency {conc} has text in both arms")
            continue
        detail = f"reference: arm {ref_name!r}; {n} requests over {len(reps)} repetitions"
        if unmatched:
            detail += f"; {unmatched} candidate request(s) without the reference's output, not compared"
        detail += "; " + ("; ".join(notes) if notes else "every output identical")
        leaf = measurement(k / n, text=f"{k} of {n} differ in the first {tokens} tokens", detail=detail)
        leaf["samples"] = {"kind": "binomial", "k": k, "n": n, "groups": len(reps)}
        leaf["first_divergence"] = sorted(positions)
        out[key] = leaf
    return out
