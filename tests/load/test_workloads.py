"""Workloads: deterministic under a seed, exact word counts, the structure each kind promises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.load.errors import LoadInputError
from harness.load.workloads import VOCABULARY, build_workload, count_tokens


def test_vocabulary_is_fixed_single_tokens() -> None:
    assert len(VOCABULARY) == len(set(VOCABULARY)) == 1024
    assert all(w.isascii() and w.isalpha() and w.islower() for w in VOCABULARY)
    assert VOCABULARY[:3] == ("babe", "bada", "badu")  # fixed forever: prompts must not drift


def test_random_is_deterministic_and_counts_are_exact() -> None:
    a = build_workload("random", {"num_requests": 20, "input_len": 50, "output_len": 8, "range_ratio": 0.5,
                                  "warmup": 3}, seed=7)
    b = build_workload("random", {"num_requests": 20, "input_len": 50, "output_len": 8, "range_ratio": 0.5,
                                  "warmup": 3}, seed=7)
    c = build_workload("random", {"num_requests": 20, "input_len": 50, "output_len": 8, "range_ratio": 0.5,
                                  "warmup": 3}, seed=8)
    assert a.measured == b.measured and a.warmup == b.warmup and a.measured != c.measured
    assert len(a.measured) == 20 and len(a.warmup) == 3
    assert len({s.request_id for s in a.measured + a.warmup}) == 23
    for s in a.measured:
        assert s.input_tokens == count_tokens(s.prompt) and 25 <= s.input_tokens <= 75 and 4 <= s.max_tokens <= 12
        assert set(s.prompt.split()) <= set(VOCABULARY)
    exact = build_workload("random", {"num_requests": 5, "input_len": 33, "output_len": 4})
    assert {s.input_tokens for s in exact.measured} == {33}


def test_shared_prefix_groups_share_their_prefix() -> None:
    wl = build_workload("shared-prefix", {"num_groups": 3, "prompts_per_group": 4, "prefix_len": 20,
                                          "suffix_len": 5, "output_len": 2}, seed=1)
    assert len(wl.measured) == 12 and all(s.input_tokens == 25 for s in wl.measured)
    by_group: dict[int, set[str]] = {}
    for s in wl.measured:
        by_group.setdefault(s.meta["group"], set()).add(" ".join(s.prompt.split()[:20]))
    assert all(len(p) == 1 for p in by_group.values()) and len({next(iter(p)) for p in by_group.values()}) == 3
    assert [s.meta["group"] for s in wl.measured] != sorted(s.meta["group"] for s in wl.measured)  # shuffled


def test_multi_round_history_grows_and_extends_the_previous_round() -> None:
    wl = build_workload("multi-round", {"num_users": 2, "num_rounds": 3, "context_len": 10,
                                        "question_len": 4, "output_len": 6}, seed=3)
    assert [(s.meta["round"], s.meta["user"]) for s in wl.measured] == [(r, u) for r in range(3) for u in range(2)]
    u0 = [s for s in wl.measured if s.meta["user"] == 0]
    assert [s.input_tokens for s in u0] == [14, 24, 34]  # + previous answer (6) and a new question (4)
    for prev, cur in zip(u0, u0[1:]):
        assert cur.prompt.startswith(prev.prompt + " ")
        assert cur.messages is not None and prev.messages is not None
        assert cur.messages[: len(prev.messages)] == prev.messages
        assert cur.messages[len(prev.messages)]["role"] == "assistant"


def test_long_doc_warmup_once_per_doc_and_hit_ratio() -> None:
    wl = build_workload("long-doc", {"num_docs": 4, "doc_len": 200, "query_len": 8, "num_queries": 20,
                                     "hit_ratio": 0.75, "output_len": 4}, seed=5)
    assert len(wl.warmup) == 4 and {s.meta["doc"] for s in wl.warmup} == {0, 1, 2, 3}
    hits = [s for s in wl.measured if s.meta["hit"]]
    misses = [s for s in wl.measured if not s.meta["hit"]]
    assert (len(hits), len(misses)) == (15, 5)
    warmed_docs = {" ".join(s.prompt.split()[:200]) for s in wl.warmup}
    assert all(" ".join(s.prompt.split()[:200]) in warmed_docs for s in hits)
    assert not any(" ".join(s.prompt.split()[:200]) in warmed_docs for s in misses)
    assert all(s.input_tokens == 208 for s in wl.measured + wl.warmup)


def test_trace_replay(tmp_path: Path) -> None:
    f = tmp_path / "trace.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in [
        {"timestamp": 0.0, "input_len": 12, "output_len": 3, "session": "a"},
        {"timestamp": 0.5, "prompt": "hello there world", "max_tokens": 2, "request_id": "custom"},
        {"input_len": 4, "output_len": 1},
    ]) + "\n\n")
    wl = build_workload("trace", {"path": str(f)}, seed=0)
    a, b, c = wl.measured
    assert (a.input_tokens, a.max_tokens, a.at_s, a.meta["session"]) == (12, 3, 0.0, "a")
    assert (b.request_id, b.input_tokens, b.at_s) == ("custom", 3, 0.5) and c.at_s is None


@pytest.mark.parametrize("line, match", [
    ("{\"input_len\": 3}", "output_len"),
    ("{\"output_len\": 3}", "'prompt'"),
    ("[1]", "JSON object"),
    ("{oops", "not a JSON object"),
    ("{\"input_len\": 3, \"output_len\": 2, \"timestamp\": -1}", "timestamp"),
])
def test_bad_trace_lines_are_located(tmp_path: Path, line: str, match: str) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text("{\"input_len\": 1, \"output_len\": 1}\n" + line + "\n")
    with pytest.raises(LoadInputError, match=match) as e:
        build_workload("trace", {"path": str(f)})
    assert f"{f}:2" in str(e.value)


@pytest.mark.parametrize("kind, params, match", [
    ("nope", {}, "known: random, shared-prefix, multi-round, long-doc, trace"),
    ("random", {"num_requests": 1, "input_len": 1}, "'output_len' is required"),
    ("random", {"num_requests": 1, "input_len": 1, "output_len": 1, "bogus": 1}, "unknown parameter.*bogus"),
    ("random", {"num_requests": "x", "input_len": 1, "output_len": 1}, "expected int"),
    ("random", {"num_requests": 1, "input_len": 0, "output_len": 1}, "expected > 0"),
    ("random", {"num_requests": 1, "input_len": 1, "output_len": 1, "range_ratio": 1.5}, "range_ratio"),
    ("long-doc", {"num_docs": 1, "doc_len": 1, "num_queries": 1, "output_len": 1, "hit_ratio": 2}, "hit_ratio"),
    ("trace", {"path": "/nonexistent/trace.jsonl"}, "No such file"),
])
def test_bad_parameters_say_what_was_expected(kind: str, params: dict[str, object], match: str) -> None:
    with pytest.raises(LoadInputError, match=match):
        build_workload(kind, params)
