"""Does the restore path return the right bytes? Greedy outputs compared across arms.

A tier that serves corrupted KV makes TTFT fall and answers wrong. Every measured request is
sent with temperature 0 and its text kept in the records; per point and repetition, a sample of
the candidate's requests (the first ``sample`` request ids in order: the profile's
``load.identity_sample``, at least 8, default ``SAMPLE``) is compared with the reference arm's
output for the same prompts over the first ``tokens`` tokens (words; the gate file's
``compared_tokens`` of the ``output_identity`` check, default ``TOKENS``). The
reference is the recompute arm when the profile has one, else the baseline arm. The leaf is the
lowest share of identical outputs over the repetitions; the detail names the first divergence.
The threshold lives in ``gates/G3.yaml`` (``output_identity``): GPU kernels are not always batch
invariant, so 90% by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from harness.config.gatespec import IDENTITY_METRIC, GateSpec
from harness.load import read_records
from harness.pipelines.sweepdata import Repetition, Sweep, measurement, point_key

__all__ = ["SAMPLE", "TOKENS", "compared_tokens", "outputs", "output_identity_measured"]

SAMPLE = 8
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


def output_identity_measured(candidate: Sweep, cand_base: Path, reference: Sweep, ref_base: Path,
                             concurrencies: Sequence[int], ref_name: str, *, sample: int = SAMPLE,
                             tokens: int = TOKENS) -> dict[str, Any]:
    """The ``compare.output_identity`` subtree: per concurrency, the lowest identical share of a
    sample of ``sample`` requests per repetition over their first ``tokens`` tokens."""
    out: dict[str, Any] = {}
    for conc in concurrencies:
        key = point_key(conc)
        ref: dict[str, list[str]] = {}
        for r in reference.get(conc, []):
            for rid, words in outputs(r, ref_base, tokens).items():
                ref.setdefault(rid, words)
        reps = candidate.get(conc, [])
        if not reps or not ref:
            side = "candidate" if not reps else f"reference arm {ref_name!r}"
            out[key] = measurement(None, detail=f"no output text recorded for the {side} at concurrency {conc}")
            continue
        shares: list[float] = []
        notes: list[str] = []
        why: Optional[str] = None
        for r in reps:
            got = outputs(r, cand_base, tokens)
            ids = sorted(rid for rid in got if rid in ref)[:sample]
            if len(ids) < min(sample, len(got)) or not ids:
                why = (f"repetition {r.repetition}: only {len(ids)} request(s) with text in both arms; "
                       f"the check needs {sample}")
                break
            same = [rid for rid in ids if got[rid] == ref[rid]]
            shares.append(len(same) / len(ids))
            diff = [(rid, _first_divergence(got[rid], ref[rid])) for rid in ids if rid not in same]
            if diff:
                rid, pos = diff[0]
                notes.append(f"rep{r.repetition}: {len(diff)} of {len(ids)} differ, first {rid} at token {pos}")
        if why is not None:
            out[key] = measurement(None, detail=why)
            continue
        worst = min(shares)
        out[key] = measurement(
            worst, text=f"{worst * 100:.0f}% identical over the first {tokens} tokens (lowest repetition)",
            detail=(f"reference: arm {ref_name!r}; sample of {sample} per repetition; "
                    + ("; ".join(notes) if notes else "every sampled output identical")))
    return out
