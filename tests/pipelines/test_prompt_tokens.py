"""Served vs requested prompt tokens of a sweep point: more than 2% off invalidates the point (the
case of issue 18: `--input-len 256` words became 1057 tokens on a real byte-level BPE model)."""

from __future__ import annotations

from harness.pipelines.shared.sweep import prompt_token_check


def _delta(prompt_tokens: float) -> dict[str, object]:
    return {"counters": {"vllm:prompt_tokens": prompt_tokens}}


def test_words_sent_as_tokens_invalidate_the_point() -> None:
    check = prompt_token_check([256] * 4, [_delta(4 * 1057)])
    assert check["valid"] is False and check["deviation"] > 3
    assert "not in the served model's tokens" in check["reason"]


def test_exact_and_near_lengths_are_valid_and_instances_add_up() -> None:
    assert prompt_token_check([1000] * 2, [_delta(1000), _delta(1000)])["valid"] is True
    assert prompt_token_check([1000], [_delta(1020)])["valid"] is True  # 2.0%: at the bound
    assert prompt_token_check([1000], [_delta(1021)])["valid"] is False


def test_unknown_served_length_is_not_a_pass() -> None:
    check = prompt_token_check([100], [None])
    assert check["valid"] is None and check["served"] is None and "no vllm:prompt_tokens" in check["reason"]
    assert prompt_token_check([100], [{"counters": {}}])["valid"] is None
