"""Output identity: candidate outputs against the reference arm's, from the records as written."""

from __future__ import annotations

import json
from pathlib import Path

from harness.config.loader import load_gate
from harness.gates.evaluate import evaluate_check
from harness.gates.outcome import Verdict
from harness.paths import gates_dir
from harness.pipelines.g3.identity import TOKENS, output_identity_measured
from harness.pipelines.shared.sweepdata import Repetition


def _rep(base: Path, arm: str, r: int, texts: dict[str, str], status: str = "ok") -> Repetition:
    rel = f"evidence/{arm}/rep{r}/records.jsonl"
    path = base / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"request_id": k, "phase": "measure", "status": status, "text": v}) + "\n"
                            for k, v in texts.items()))
    return Repetition(arm, 2, r, {"completed": len(texts)}, [1.0], [rel])


def _texts(n: int, tag: str = "w") -> dict[str, str]:
    return {f"q{i:02d}": " ".join(f"{tag}{i}-{k}" for k in range(20)) for i in range(n)}


def _diverge(texts: dict[str, str], rid: str, at: int) -> None:
    words = texts[rid].split()
    words[at] = "other"
    texts[rid] = " ".join(words)


def _verdict(leaf: dict[str, object]) -> Verdict:
    check = load_gate(gates_dir() / "G3.yaml").check("output_identity")
    return evaluate_check(check, {"compare": {"output_divergence": {"c2": leaf}}}).verdict


def test_every_request_is_compared_and_each_divergence_located(tmp_path: Path) -> None:
    ref = _texts(10)
    reference = {2: [_rep(tmp_path / "g2", "baseline", 1, ref)]}
    cand_texts = dict(ref)
    _diverge(cand_texts, "q03", 5)
    _diverge(cand_texts, "q09", 0)  # the last request id: the old sample of 8 never looked at it
    candidate = {2: [_rep(tmp_path / "g3", "candidate", 1, ref), _rep(tmp_path / "g3", "candidate", 2, cand_texts)]}
    leaf = output_identity_measured(candidate, tmp_path / "g3", reference, tmp_path / "g2", [2], "baseline")["c2"]
    assert leaf["value"] == 2 / 20  # pooled over both repetitions
    assert leaf["samples"] == {"kind": "binomial", "k": 2, "n": 20, "groups": 2}
    assert leaf["first_divergence"] == [0, 5]
    assert "rep2: 2 of 10 differ (q03 at token 5, q09 at token 0)" in leaf["detail"]
    assert "'baseline'" in leaf["detail"]


def test_later_documents_corrupted_in_every_repetition_fail(tmp_path: Path) -> None:
    # the partial-corruption scenario of issue 28: 7 of 16 outputs differ in all 5 repetitions, all
    # of them after the first 8 request ids (the old check compared only those, and said 100%)
    ref = _texts(16)
    bad = dict(ref)
    for i in range(9, 16):
        _diverge(bad, f"q{i:02d}", 2)
    reference = {2: [_rep(tmp_path, "r", 1, ref)]}
    candidate = {2: [_rep(tmp_path, "c", r, bad) for r in range(1, 6)]}
    leaf = output_identity_measured(candidate, tmp_path, reference, tmp_path, [2], "r")["c2"]
    assert leaf["samples"]["k"] == 35 and leaf["samples"]["n"] == 80
    assert _verdict(leaf) is Verdict.FAIL


def test_one_divergence_in_80_passes_at_the_allowed_10_percent(tmp_path: Path) -> None:
    ref = _texts(16)
    one = dict(ref)
    _diverge(one, "q04", 7)
    reference = {2: [_rep(tmp_path, "r", 1, ref)]}
    candidate = {2: [_rep(tmp_path, "c", r, one if r == 3 else ref) for r in range(1, 6)]}
    leaf = output_identity_measured(candidate, tmp_path, reference, tmp_path, [2], "r")["c2"]
    assert leaf["samples"]["k"] == 1 and leaf["samples"]["n"] == 80
    assert _verdict(leaf) is Verdict.PASS
    # the same rate on too few requests does not decide: 1 in 8 is INCONCLUSIVE, not FAIL
    few = output_identity_measured({2: [_rep(tmp_path, "f", 1, {k: one[k] for k in list(one)[:8]})]},
                                   tmp_path, reference, tmp_path, [2], "r")["c2"]
    assert few["samples"]["n"] == 8 and _verdict(few) is Verdict.INCONCLUSIVE


def test_a_difference_after_the_compared_tokens_is_not_counted(tmp_path: Path) -> None:
    ref = _texts(8)
    late = {k: v + " extra" for k, v in ref.items()}  # beyond the first 16 tokens
    out = output_identity_measured({2: [_rep(tmp_path, "c", 1, late)]}, tmp_path,
                                   {2: [_rep(tmp_path, "r", 1, ref)]}, tmp_path, [2], "r")
    assert TOKENS == 16 and out["c2"]["value"] == 0.0


def test_missing_text_or_points_are_not_run(tmp_path: Path) -> None:
    ref = {2: [_rep(tmp_path, "r", 1, _texts(8))]}
    out = output_identity_measured({}, tmp_path, ref, tmp_path, [2, 4], "r")
    assert out["c2"]["value"] is None and "candidate" in out["c2"]["detail"]
    assert out["c4"]["value"] is None
    failed = {2: [_rep(tmp_path, "f", 1, _texts(8), status="error")]}
    out = output_identity_measured(failed, tmp_path, ref, tmp_path, [2], "r")
    assert out["c2"]["value"] is None and "text in both arms" in out["c2"]["detail"]
    # requests the reference has no output for are named, not counted as identical
    more = {2: [_rep(tmp_path, "m", 1, _texts(11))]}
    leaf = output_identity_measured(more, tmp_path, ref, tmp_path, [2], "r")["c2"]
    assert leaf["samples"]["n"] == 8 and "3 candidate request(s) without the reference's output" in leaf["detail"]


def test_compared_tokens_is_a_parameter(tmp_path: Path) -> None:
    ref = _texts(12)
    cand = dict(ref)
    _diverge(cand, "q10", 3)
    reference = {2: [_rep(tmp_path, "r", 1, ref)]}
    candidate = {2: [_rep(tmp_path, "c", 1, cand)]}
    # a divergence at token 3 is outside the first 3 tokens, inside the first 4
    assert output_identity_measured(candidate, tmp_path, reference, tmp_path, [2], "r",
                                    tokens=3)["c2"]["value"] == 0.0
    leaf = output_identity_measured(candidate, tmp_path, reference, tmp_path, [2], "r", tokens=4)["c2"]
    assert leaf["value"] == 1 / 12 and "in the first 4 tokens" in leaf["text"]


def test_compared_tokens_from_the_gate_file(tmp_path: Path) -> None:
    from harness.config.gatespec import GateSpec
    from harness.config.loader import load_gate
    from harness.paths import gates_dir
    from harness.pipelines.g3.identity import compared_tokens

    g3 = load_gate(gates_dir() / "G3.yaml")
    assert compared_tokens(g3) == TOKENS == 16  # gates/G3.yaml states the default
    data = g3.model_dump()
    for c in data["checks"]:
        if c["id"] == "output_identity":
            c["compared_tokens"] = 32
    assert compared_tokens(GateSpec.model_validate(data)) == 32
    for c in data["checks"]:
        c.pop("compared_tokens", None)
    assert compared_tokens(GateSpec.model_validate(data)) == TOKENS


def _write(base: Path, rel: str, recs: list[dict[str, object]]) -> str:
    path = base / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return rel


def test_records_read_across_files_phases_and_repetitions_are_all_counted(tmp_path: Path) -> None:
    ref = _texts(6)
    reference = {2: [_rep(tmp_path, "r", 1, ref)]}
    short = dict(ref)
    short["q01"] = " ".join(ref["q01"].split()[:5])  # a truncated answer diverges where it stops
    for i in (2, 3, 4, 5):
        _diverge(short, f"q0{i}", 1)
    # a missing file before a real one, a record without "phase" (measured), a warm-up record (not)
    rel = _write(tmp_path, "c1.jsonl", [{"request_id": "w", "phase": "warmup", "status": "ok", "text": "x"},
                                        {"request_id": "q00", "status": "ok", "text": ref["q00"]}])
    rel2 = _write(tmp_path, "c2.jsonl", [{"request_id": k, "phase": "measure", "status": "ok", "text": v}
                                         for k, v in short.items() if k != "q00"] +
                  [{"request_id": "zz", "phase": "measure", "status": "ok", "text": "no reference"}])
    rep1 = Repetition("c", 2, 1, {"completed": 6}, [1.0], ["missing.jsonl", rel, rel2])
    rep2 = Repetition("c", 2, 2, {"completed": 6}, [1.0], [rel2])
    leaf = output_identity_measured({2: [rep1, rep2]}, tmp_path, reference, tmp_path, [2], "r")["c2"]
    # rep1: q00 (no phase: measured) + q01..q05 from the second file; rep2: q01..q05
    assert leaf["samples"] == {"kind": "binomial", "k": 10, "n": 11, "groups": 2}
    assert leaf["first_divergence"] == [1, 1, 1, 1, 1, 1, 1, 1, 5, 5]  # every repetition's, pooled
    assert "2 candidate request(s) without the reference's output" in leaf["detail"]  # one per repetition
    assert "rep1: 5 of 6 differ (q01 at token 5, q02 at token 1, q03 at token 1 and 2 more)" in leaf["detail"]
    # a point the reference has no text for names the reference arm
    out = output_identity_measured({2: [rep1], 4: [rep1]}, tmp_path, reference, tmp_path, [4], "r")
    assert out["c4"]["value"] is None and "reference arm 'r'" in out["c4"]["detail"]
