"""Hash-id traces: parsing with located errors, prompts from block ids, filters, expected reuse,
the generator, and the CLI (bad input is exit 2 naming file, line and field)."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest

from harness.load import cli
from harness.load.errors import LoadInputError
from harness.load.hashtrace import (
    TraceRequest,
    capacity_blocks_for_bytes,
    expected_reuse,
    parse_trace,
    select,
    trace_lines,
    working_set_trace,
)
from harness.load.tracegen import TraceGenSpec, write_trace
from harness.load.workloads import build_workload, count_tokens

DATA = Path(__file__).resolve().parents[1] / "data" / "load"
SNIPPET = DATA / "mooncake_snippet.jsonl"


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# --- expected reuse: a pure function, checked by hand on short snippets --------------------------
def test_expected_reuse_unbounded_counts_leading_full_blocks_seen_before() -> None:
    bs = 4
    reqs = [(12, [1, 2, 3]),      # nothing seen: 0
            (10, [1, 2, 4]),      # 1, 2 seen (8 tokens); 4 is the partial last block
            (8, [1, 5]),          # 1 seen (4); 5 new
            (12, [9, 2, 3]),      # 2, 3 seen but not a prefix: 0
            (11, [1, 2, 4])]      # 1, 2 seen; 4 was partial before, never stored, and partial now: 8
    est = expected_reuse(reqs, bs)
    assert (est.prompt_tokens, est.reused_tokens) == (53, 8 + 4 + 8)
    assert est.ratio == pytest.approx(20 / 53)


def test_expected_reuse_lru_capacity_evicts_least_recently_used() -> None:
    bs = 1
    reqs = [(2, [1, 2]), (2, [3, 4]), (2, [1, 2])]
    assert expected_reuse(reqs, bs, 4).reused_tokens == 2  # all four fit
    assert expected_reuse(reqs, bs, 3).reused_tokens == 0  # 1 was evicted by 4, so no prefix
    # a hit refreshes: 1, 2 touched by the second request survive the third's new blocks
    reqs2 = [(2, [1, 2]), (1, [1]), (2, [3, 4]), (1, [1])]
    assert expected_reuse(reqs2, bs, 3).reused_tokens == 1 + 1
    assert expected_reuse(reqs2, bs, 2).reused_tokens == 1 + 0


def test_expected_reuse_of_the_snippet_falls_with_the_tier_size() -> None:
    reqs = [(r.input_length, r.hash_ids) for r in parse_trace(SNIPPET, block_size=512)]
    ratios = [expected_reuse(reqs, 512, c).ratio for c in (6, 12, 16, 0)]
    assert ratios == sorted(ratios) and ratios[0] < 0.1 and ratios[-1] > 0.5
    assert capacity_blocks_for_bytes(12 * 512 * 100 + 99, 512, 100) == 12


# --- parsing and bad input ------------------------------------------------------------------------
@pytest.mark.parametrize(("row", "needle"), [
    ({"input_length": 4, "output_length": 1, "hash_ids": [1]}, "field 'timestamp' is missing"),
    ({"timestamp": -1, "input_length": 4, "output_length": 1, "hash_ids": [1]}, "field 'timestamp' = -1"),
    ({"timestamp": 0, "input_length": "4", "output_length": 1, "hash_ids": [1]}, "field 'input_length' = '4'"),
    ({"timestamp": 0, "input_length": 4, "hash_ids": [1]}, "field 'output_length' is missing"),
    ({"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": "1"}, "field 'hash_ids'"),
    ({"timestamp": 0, "input_length": 9, "output_length": 1, "hash_ids": [1, 2]}, "needs 3 blocks of 4"),
])
def test_bad_line_names_file_line_and_field(tmp_path: Path, row: dict[str, object], needle: str) -> None:
    good = {"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [7]}
    f = _write(tmp_path / "t.jsonl", [good, row])
    with pytest.raises(LoadInputError) as exc:
        parse_trace(f, block_size=4)
    assert str(exc.value).startswith(f"{f}:2: ") and needle in str(exc.value)


def test_not_json_and_time_going_back(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text('{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [7]}\n{oops\n')
    with pytest.raises(LoadInputError, match=r"t\.jsonl:2: not a JSON object"):
        parse_trace(f, block_size=4)
    _write(f, [{"timestamp": 5, "input_length": 4, "output_length": 1, "hash_ids": [7]},
               {"timestamp": 4, "input_length": 4, "output_length": 1, "hash_ids": [7]}])
    with pytest.raises(LoadInputError, match=r"t\.jsonl:2: field 'timestamp' goes back in time"):
        parse_trace(f, block_size=4)
    with pytest.raises(LoadInputError, match="missing.jsonl"):
        parse_trace(tmp_path / "missing.jsonl", block_size=4)


def test_cli_bad_trace_is_exit_2_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _write(tmp_path / "bad.jsonl", [{"timestamp": 0, "input_length": 600, "output_length": 1,
                                         "hash_ids": [1]}])
    rc = cli.main(["run", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--workload", "hash-trace",
                   "--trace", str(f), "--out", str(tmp_path / "o"), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and f"{f}:1: field 'hash_ids' has 1 ids" in err and "Traceback" not in err


# --- prompts ------------------------------------------------------------------------------------------
def test_equal_ids_give_identical_blocks_and_different_ids_differ() -> None:
    wl = build_workload("hash-trace", {"path": str(SNIPPET)}, seed=3)
    bs = 512
    blocks: dict[int, str] = {}
    reqs = parse_trace(SNIPPET, block_size=bs)
    assert len(wl.measured) == len(reqs)
    for spec, r in zip(wl.measured, reqs):
        words = spec.prompt.split()
        assert spec.input_tokens == count_tokens(spec.prompt) == r.input_length  # the trace's lengths
        assert spec.max_tokens == r.output_length
        for i, h in enumerate(r.hash_ids):
            blk = " ".join(words[i * bs:(i + 1) * bs])
            if len(blk.split()) == bs:
                assert blocks.setdefault(h, blk) == blk
            else:  # the partial last block is a prefix of the same id's block
                assert all(b.startswith(blk) for k, b in blocks.items() if k == h)
    full = list(blocks.values())
    assert len(set(full)) == len(full)  # different ids, different blocks
    other = build_workload("hash-trace", {"path": str(SNIPPET)}, seed=4)
    assert other.measured[0].prompt != wl.measured[0].prompt
    assert build_workload("hash-trace", {"path": str(SNIPPET)}, seed=3).measured == wl.measured


def test_replay_times_speed_closed_loop_and_expected_in_describe() -> None:
    wl = build_workload("hash-trace", {"path": str(SNIPPET), "speed": 2.0, "lru_blocks": 12})
    assert [s.at_s for s in wl.measured][:3] == [0.0, 0.02, 0.045]  # ms / 1000 / speed
    d = wl.describe()["expected"]["reuse"]
    assert d["lru_capacity_blocks"] == 12 and 0.18 < d["expected_hit_rate"] < 0.2
    closed = build_workload("hash-trace", {"path": str(SNIPPET), "replay": "closed"})
    assert all(s.at_s is None for s in closed.measured)
    by_bytes = build_workload("hash-trace", {"path": str(SNIPPET), "lru_bytes": 12 * 512 * 64,
                                             "kv_bytes_per_token": 64})
    assert by_bytes.expected["reuse"] == d
    assert wl.expected["trace_sha256"] == hashlib.sha256(SNIPPET.read_bytes()).hexdigest()
    with pytest.raises(LoadInputError, match="replay"):
        build_workload("hash-trace", {"path": str(SNIPPET), "replay": "fast"})


def test_filters_window_context_sample_and_bailian_seconds(tmp_path: Path) -> None:
    reqs = parse_trace(SNIPPET, block_size=512)
    assert [r.line for r in select(reqs, start_s=0.1, end_s=0.2)] == [4, 5]
    assert all(r.input_length + r.output_length <= 2000 for r in select(reqs, max_context=2000))
    a = select(reqs, sample=0.5, seed=1)
    assert a == select(reqs, sample=0.5, seed=1) and 0 < len(a) < len(reqs) and a != select(reqs, sample=0.5, seed=2)
    assert len(select(reqs, max_requests=3)) == 3
    with pytest.raises(LoadInputError, match="sample"):
        select(reqs, sample=0.0)
    bailian = _write(tmp_path / "qwen.jsonl", [
        {"chat_id": 1, "parent_chat_id": -1, "timestamp": 1.5, "input_length": 40, "output_length": 3,
         "type": "text", "turn": 1, "hash_ids": [10, 11, 12]},
        {"chat_id": 2, "parent_chat_id": 1, "timestamp": 3.0, "input_length": 50, "output_length": 3,
         "type": "text", "turn": 2, "hash_ids": [10, 11, 12, 13]}])
    wl = build_workload("hash-trace", {"path": str(bailian), "block_size": 16, "time_unit": "s"})
    assert [s.at_s for s in wl.measured] == [0.0, 1.5]
    assert wl.measured[1].prompt.startswith(" ".join(wl.measured[0].prompt.split()[:32]))
    assert wl.measured[1].meta["turn"] == 2 and wl.measured[1].meta["parent_chat_id"] == 1
    assert parse_trace(bailian, block_size=16, time_unit="s")[1] == TraceRequest(
        2, 3.0, 50, 3, (10, 11, 12, 13), {"chat_id": 2, "parent_chat_id": 1, "type": "text", "turn": 2})


# --- the generator --------------------------------------------------------------------------------
def test_generator_is_seeded_parses_back_and_reuse_follows_the_knob(tmp_path: Path) -> None:
    spec = TraceGenSpec(requests=200, block_size=16, blocks=6, prefix_blocks=4, prefixes=3, reuse=0.8, seed=5)
    a, b = io.StringIO(), io.StringIO()
    assert write_trace(spec, a) == 200
    write_trace(spec, b)
    assert a.getvalue() == b.getvalue()
    f = tmp_path / "g.jsonl"
    f.write_text(a.getvalue())
    reqs = parse_trace(f, block_size=16)
    ratio = expected_reuse(((r.input_length, r.hash_ids) for r in reqs), 16).ratio

    def reuse_of(reuse: float) -> float:
        g = tmp_path / f"g{reuse}.jsonl"
        with open(g, "w") as out:
            write_trace(TraceGenSpec(requests=200, block_size=16, blocks=6, prefix_blocks=4, prefixes=3,
                                     reuse=reuse, seed=5), out)
        return expected_reuse(((r.input_length, r.hash_ids) for r in parse_trace(g, block_size=16)), 16).ratio

    # 80% of requests reuse 4 of ~6 blocks (the first use of each prefix is a miss)
    assert 0.45 < ratio < 0.65 and reuse_of(0.0) == 0.0 and reuse_of(0.4) < ratio
    with pytest.raises(LoadInputError, match="reuse"):
        TraceGenSpec(reuse=1.5).check()


def test_trace_gen_cli_prints_expected_reuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gen.jsonl"
    rc = cli.main(["trace-gen", "--out", str(out), "--requests", "30", "--reuse", "1", "--prefixes", "1",
                   "--blocks", "4", "--prefix-blocks", "3", "--no-partial", "--seed", "2"])
    text = capsys.readouterr().out
    assert rc == 0 and len(out.read_text().splitlines()) == 30
    # one prefix of 3 of 4 blocks, every request: 29 of 30 requests reuse 3 blocks
    assert f"expected reuse under an unbounded LRU: {29 * 3 / (30 * 4):.1%}" in text


def test_cli_options_reach_the_workload_parameters() -> None:
    args = cli.build_parser().parse_args([
        "run", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--out", "o", "--workload", "hash-trace",
        "--trace", str(SNIPPET), "--block-size", "16", "--time-unit", "s", "--replay", "closed", "--speed", "3",
        "--max-context", "4096", "--start", "1", "--end", "9", "--sample", "0.5", "--max-requests", "7",
        "--lru-bytes", "1000", "--kv-bytes-per-token", "10"])
    assert cli.config_from_args(args).workload_params == {
        "path": str(SNIPPET), "block_size": 16, "time_unit": "s", "replay": "closed", "speed": 3.0,
        "max_context": 4096, "start_s": 1.0, "end_s": 9.0, "sample": 0.5, "max_requests": 7,
        "lru_bytes": 1000, "kv_bytes_per_token": 10}


# --- capacity-cliff points: a working set as a hash-id trace -------------------------------------
def test_working_set_trace_populates_then_cycles_with_a_unique_partial_suffix() -> None:
    reqs, populate = working_set_trace(prefixes=3, prefix_blocks=2, block_size=4, suffix_len=1, passes=2,
                                       first_id=100)
    assert populate == 3 and len(reqs) == 3 + 6
    assert [r.extra["prefix"] for r in reqs] == [0, 1, 2] * 3
    assert reqs[0].hash_ids[:2] == (100, 101) and reqs[3].hash_ids[:2] == (100, 101)
    suffixes = [r.hash_ids[-1] for r in reqs]
    assert len(set(suffixes)) == len(reqs) and min(suffixes) >= 106  # never reused, past the prefix ids
    assert all(r.input_length == 2 * 4 + 1 for r in reqs)
    rnd, _ = working_set_trace(prefixes=5, prefix_blocks=1, block_size=4, passes=4, order="random", seed=3)
    assert {r.extra["prefix"] for r in rnd[5:]} <= set(range(5)) and len({r.extra["prefix"] for r in rnd[5:]}) > 1
    for bad in ({"suffix_len": 4}, {"order": "zipf"}, {"passes": 0}):
        args = {"prefixes": 2, "prefix_blocks": 1, "block_size": 4, **bad}
        with pytest.raises(LoadInputError):
            working_set_trace(**args)  # type: ignore[arg-type]


def test_cyclic_working_set_is_a_cliff_at_the_lru_capacity() -> None:
    """Below the capacity every measured prefix block is reused; one prefix past it, none is (an
    LRU walked cyclically evicts each block just before it is needed). The populate pass only warms."""
    for prefixes, capacity, reused in ((4, 8, True), (4, 9, True), (5, 8, False), (16, 8, False)):
        reqs, populate = working_set_trace(prefixes=prefixes, prefix_blocks=2, block_size=4, suffix_len=2)
        est = expected_reuse([(r.input_length, r.hash_ids) for r in reqs], 4, capacity, count_from=populate)
        assert est.prompt_tokens == prefixes * 10
        assert est.ratio == (pytest.approx(8 / 10) if reused else 0.0), (prefixes, capacity)
    # without count_from the populate pass (all misses) dilutes the figure
    reqs, populate = working_set_trace(prefixes=4, prefix_blocks=2, block_size=4, suffix_len=2)
    assert expected_reuse([(r.input_length, r.hash_ids) for r in reqs], 4, 8).ratio == pytest.approx(0.4)


def test_working_set_trace_is_written_in_mooncake_format_and_replays(tmp_path: Path) -> None:
    reqs, populate = working_set_trace(prefixes=3, prefix_blocks=2, block_size=512, suffix_len=16, passes=1)
    path = tmp_path / "ws.jsonl"
    path.write_text("".join(trace_lines(reqs)))
    back = parse_trace(path, block_size=512)
    assert [(r.input_length, r.hash_ids, r.output_length) for r in back] == \
        [(r.input_length, r.hash_ids, r.output_length) for r in reqs]
    wl = build_workload("hash-trace", {"path": str(path), "replay": "closed", "lru_blocks": 6}, seed=0)
    assert [s.input_tokens for s in wl.measured] == [2 * 512 + 16] * 6
    # whole-trace figure: the populate pass is counted as misses here
    assert wl.expected["reuse"]["reused_tokens"] == 3 * 1024
