"""Output identity: candidate outputs against the reference arm's, from the records as written."""

from __future__ import annotations

import json
from pathlib import Path

from harness.pipelines.identity import SAMPLE, TOKENS, output_identity_measured
from harness.pipelines.sweepdata import Repetition


def _rep(base: Path, arm: str, r: int, texts: dict[str, str], status: str = "ok") -> Repetition:
    rel = f"evidence/{arm}/rep{r}/records.jsonl"
    path = base / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"request_id": k, "phase": "measure", "status": status, "text": v}) + "\n"
                            for k, v in texts.items()))
    return Repetition(arm, 2, r, {"completed": len(texts)}, [1.0], [rel])


def _texts(n: int, tag: str = "w") -> dict[str, str]:
    return {f"q{i:02d}": " ".join(f"{tag}{i}-{k}" for k in range(20)) for i in range(n)}


def test_identical_outputs_pass_and_one_divergence_is_located(tmp_path: Path) -> None:
    ref = _texts(10)
    reference = {2: [_rep(tmp_path / "g2", "baseline", 1, ref)]}
    cand_texts = dict(ref)
    words = cand_texts["q03"].split()
    words[5] = "other"
    cand_texts["q03"] = " ".join(words)
    words = cand_texts["q09"].split()  # outside the sample of 8: not compared
    cand_texts["q09"] = "x " + " ".join(words[1:])
    candidate = {2: [_rep(tmp_path / "g3", "candidate", 1, ref), _rep(tmp_path / "g3", "candidate", 2, cand_texts)]}
    out = output_identity_measured(candidate, tmp_path / "g3", reference, tmp_path / "g2", [2], "baseline")
    leaf = out["c2"]
    assert leaf["value"] == (SAMPLE - 1) / SAMPLE  # the lowest repetition
    assert "rep2: 1 of 8 differ, first q03 at token 5" in leaf["detail"] and "'baseline'" in leaf["detail"]


def test_a_difference_after_the_compared_tokens_is_not_counted(tmp_path: Path) -> None:
    ref = _texts(8)
    late = {k: v + " extra" for k, v in ref.items()}  # beyond the first 16 tokens
    out = output_identity_measured({2: [_rep(tmp_path, "c", 1, late)]}, tmp_path,
                                   {2: [_rep(tmp_path, "r", 1, ref)]}, tmp_path, [2], "r")
    assert TOKENS == 16 and out["c2"]["value"] == 1.0


def test_missing_text_or_points_are_not_run(tmp_path: Path) -> None:
    ref = {2: [_rep(tmp_path, "r", 1, _texts(8))]}
    out = output_identity_measured({}, tmp_path, ref, tmp_path, [2, 4], "r")
    assert out["c2"]["value"] is None and "candidate" in out["c2"]["detail"]
    assert out["c4"]["value"] is None
    few = {2: [_rep(tmp_path, "c", 1, _texts(3))]}  # fewer requests than the sample: compare them all
    assert output_identity_measured(few, tmp_path, ref, tmp_path, [2], "r")["c2"]["value"] == 1.0
    failed = {2: [_rep(tmp_path, "f", 1, _texts(8), status="error")]}
    out = output_identity_measured(failed, tmp_path, ref, tmp_path, [2], "r")
    assert out["c2"]["value"] is None and "needs 8" in out["c2"]["detail"]
