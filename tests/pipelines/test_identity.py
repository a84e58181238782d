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


def test_sample_size_and_compared_tokens_are_parameters(tmp_path: Path) -> None:
    ref = _texts(12)
    cand = dict(ref)
    words = cand["q10"].split()
    words[3] = "other"  # the 11th request: outside a sample of 8, inside a sample of 12
    cand["q10"] = " ".join(words)
    reference = {2: [_rep(tmp_path, "r", 1, ref)]}
    candidate = {2: [_rep(tmp_path, "c", 1, cand)]}
    assert output_identity_measured(candidate, tmp_path, reference, tmp_path, [2], "r")["c2"]["value"] == 1.0
    leaf = output_identity_measured(candidate, tmp_path, reference, tmp_path, [2], "r", sample=12)["c2"]
    assert leaf["value"] == 11 / 12 and "sample of 12 per repetition" in leaf["detail"]
    # a divergence at token 3 is outside the first 3 tokens, inside the first 4
    assert output_identity_measured(candidate, tmp_path, reference, tmp_path, [2], "r", sample=12,
                                    tokens=3)["c2"]["value"] == 1.0
    leaf = output_identity_measured(candidate, tmp_path, reference, tmp_path, [2], "r", sample=12, tokens=4)["c2"]
    assert leaf["value"] == 11 / 12 and "over the first 4 tokens" in leaf["text"]
    # more requested than recorded with text in both arms: every one is compared, none is invented
    short = {2: [_rep(tmp_path, "s", 1, _texts(9))]}
    out = output_identity_measured(short, tmp_path, reference, tmp_path, [2], "r", sample=12)
    assert out["c2"]["value"] == 1.0


def test_compared_tokens_from_the_gate_file(tmp_path: Path) -> None:
    from harness.config.gatespec import GateSpec
    from harness.config.loader import load_gate
    from harness.paths import gates_dir
    from harness.pipelines.identity import compared_tokens

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
