"""Command line of the load generator: ``load run ...`` and ``load summarize PATH``.

The same parser serves ``kvgate load`` (``harness.cli.cmd_load``) and the node agent
(``python3 -I -S kvgate-agent.pyz load ...``), which calls :func:`main`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional, TextIO

from harness.errors import KvgateError
from harness.exitcodes import ExitCode  # stdlib only, bundled in the agent
from harness.load.errors import LoadInputError
from harness.load.hashtrace import expected_reuse, parse_trace
from harness.load.records import read_records
from harness.load.runner import RECORDS_FILE, SUMMARY_FILE, LoadConfig, run_load
from harness.load.summary import DEFAULT_PERCENTILES, Summary, records_from_vllm
from harness.load.tracegen import TraceGenSpec, write_trace
from harness.load.workloads import WORKLOADS
from harness.terminaltext import for_terminal

# CLI option -> workload parameter, per workload (only options the user gave are passed on)
_WORKLOAD_OPTS: dict[str, dict[str, str]] = {
    "random": {"num_requests": "num_requests", "input_len": "input_len", "output_len": "output_len",
               "range_ratio": "range_ratio", "warmup": "warmup"},
    "shared-prefix": {"num_groups": "num_groups", "prompts_per_group": "prompts_per_group",
                      "prefix_len": "prefix_len", "suffix_len": "input_len", "output_len": "output_len"},
    "multi-round": {"num_users": "num_users", "num_rounds": "num_rounds", "context_len": "context_len",
                    "question_len": "input_len", "output_len": "output_len"},
    "long-doc": {"num_docs": "num_docs", "doc_len": "doc_len", "query_len": "query_len",
                 "num_queries": "num_queries", "hit_ratio": "hit_ratio", "output_len": "output_len"},
    "trace": {"path": "trace"},
    "hash-trace": {"path": "trace", "block_size": "block_size", "time_unit": "time_unit", "replay": "replay",
                   "speed": "speed", "max_context": "max_context", "start_s": "start", "end_s": "end",
                   "sample": "sample", "max_requests": "max_requests", "lru_blocks": "lru_blocks",
                   "lru_bytes": "lru_bytes", "kv_bytes_per_token": "kv_bytes_per_token"},
}
_SESSION_OPTS = {"num_sessions": "num_sessions", "num_turns": "num_turns", "shared_prefix_len": "prefix_len",
                 "context_len": "context_len", "question_len": "input_len", "output_len": "output_len",
                 "think_time_s": "think_time", "think_dist": "think_dist", "max_context": "max_context"}
_WORKLOAD_OPTS["sessions"] = _WORKLOAD_OPTS["agent"] = _SESSION_OPTS


def _goodput(items: Optional[Sequence[str]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items or ():
        name, sep, value = item.partition(":")
        try:
            if not sep:
                raise ValueError
            out[name.strip()] = float(value)
        except ValueError:
            raise LoadInputError(
                f"--goodput {item!r}: expected KEY:MS such as ttft:500 (keys ttft, tpot, e2el)") from None
    return out


def _percentiles(text: Optional[str]) -> tuple[float, ...]:
    if not text:
        return DEFAULT_PERCENTILES
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise LoadInputError(f"--percentiles {text!r}: expected numbers separated by commas, e.g. 50,90,99") from None


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``run``, ``trace-gen`` and ``summarize`` subcommands to ``parser``."""
    sub = parser.add_subparsers(dest="load_command", metavar="SUBCOMMAND")
    _add_run(sub)
    _add_trace_gen(sub)
    _add_summarize(sub)


def _add_run(sub: Any) -> None:
    r = sub.add_parser("run", help="run a workload against an OpenAI-compatible endpoint",
                       description="Run a workload against an OpenAI-compatible streaming endpoint; write "
                       "DIR/records.jsonl (one line per request, as they complete) and DIR/summary.json "
                       "(vllm bench serve key names). Ctrl-C stops cleanly and keeps what was taken.")
    r.add_argument("--endpoint", required=True, help="base URL, e.g. http://127.0.0.1:8000 or .../v1")
    r.add_argument("--model", required=True, help="model name sent in each request")
    r.add_argument("--api", choices=["completions", "chat"], default="completions")
    r.add_argument("--prompt-format", choices=["text", "token-ids"], default="text",
                   help="token-ids: send completions prompts as token ids, one per workload word, so a real "
                   "model serves exactly the requested lengths (text: exact for the KV emulator only)")
    r.add_argument("--workload", choices=list(WORKLOADS), default="random")
    r.add_argument("--out", required=True, type=Path, metavar="DIR", help="output directory")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--concurrency", type=int, default=1, help="max requests in flight (closed loop: workers)")
    r.add_argument("--request-rate", type=float, default=None,
                   help="open loop at this many requests/s (default: closed loop)")
    r.add_argument("--burstiness", type=float, default=1.0, help="gamma shape of arrivals (1 = Poisson)")
    r.add_argument("--num-requests", type=int, default=None,
                   help="random: number of requests; other workloads: cap (cycles when larger)")
    r.add_argument("--duration", type=float, default=None, metavar="SECONDS", help="stop sending after this")
    r.add_argument("--ramp-up", type=float, default=0.0, metavar="SECONDS", help="ramp concurrency or rate up")
    r.add_argument("--no-warmup", action="store_true", help="skip the workload's warm-up requests")
    _add_workload_options(r)
    _add_client_options(r)


def _add_workload_options(r: argparse.ArgumentParser) -> None:
    g = r.add_argument_group("workload parameters")
    g.add_argument("--input-len", type=int, help="random: prompt words; shared-prefix: suffix; multi-round: question")
    g.add_argument("--output-len", type=int, help="max tokens to generate")
    g.add_argument("--range-ratio", type=float, help="random: lengths uniform in len*[1-r, 1+r]")
    g.add_argument("--warmup", type=int, help="random: warm-up requests (not measured)")
    g.add_argument("--num-groups", type=int, help="shared-prefix: groups")
    g.add_argument("--prompts-per-group", type=int, help="shared-prefix: prompts per group")
    g.add_argument("--prefix-len", type=int, help="shared-prefix: shared prefix words")
    g.add_argument("--num-users", type=int, help="multi-round: users")
    g.add_argument("--num-rounds", type=int, help="multi-round: rounds per user")
    g.add_argument("--context-len", type=int, help="multi-round: first context words")
    g.add_argument("--num-docs", type=int, help="long-doc: documents")
    g.add_argument("--doc-len", type=int, help="long-doc: words per document")
    g.add_argument("--query-len", type=int, help="long-doc: words per question")
    g.add_argument("--num-queries", type=int, help="long-doc: measured questions")
    g.add_argument("--hit-ratio", type=float, help="long-doc: fraction of questions on warmed documents")
    g.add_argument("--trace", help="trace, hash-trace: JSONL file to replay")
    h = r.add_argument_group("hash-trace (Mooncake FAST'25 / Qwen-Bailian hash-id traces)")
    h.add_argument("--block-size", type=int, help="tokens per hash id (Mooncake 512, Bailian 16)")
    h.add_argument("--time-unit", choices=["ms", "s"], help="unit of 'timestamp' (Mooncake ms, Bailian s)")
    h.add_argument("--replay", choices=["timestamps", "closed"],
                   help="open loop at the trace's timestamps (default) or closed loop")
    h.add_argument("--speed", type=float, help="replay speed factor (2 = twice as fast)")
    h.add_argument("--max-context", type=int, help="keep requests with input+output <= this")
    h.add_argument("--start", type=float, metavar="SECONDS", help="keep requests at or after this trace time")
    h.add_argument("--end", type=float, metavar="SECONDS", help="keep requests before this trace time")
    h.add_argument("--sample", type=float, help="keep this fraction of requests (seeded by --seed)")
    h.add_argument("--max-requests", type=int, help="keep the first N requests after filtering")
    h.add_argument("--lru-blocks", type=int, help="tier size in blocks for the expected reuse (0: unbounded)")
    h.add_argument("--lru-bytes", type=int, help="tier size in bytes for the expected reuse")
    h.add_argument("--kv-bytes-per-token", type=int, help="KV bytes per token (with --lru-bytes)")
    se = r.add_argument_group("sessions, agent (multi-turn; --prefix-len: the prefix every session shares, "
                              "--context-len: each session's own, --input-len: each question, --max-context)")
    se.add_argument("--num-sessions", type=int, help="sessions (--num-requests caps the turns)")
    se.add_argument("--num-turns", type=int, help="turns per session")
    se.add_argument("--think-time", type=float, metavar="SECONDS", help="think time between turns (mean)")
    se.add_argument("--think-dist", choices=["fixed", "exponential"], help="think time distribution")


def _add_client_options(r: argparse.ArgumentParser) -> None:
    c = r.add_argument_group("client")
    c.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS", help="per request")
    c.add_argument("--idle-timeout", type=float, default=None, metavar="SECONDS", help="no byte for this long")
    c.add_argument("--no-ignore-eos", action="store_true", help="do not send ignore_eos")
    c.add_argument("--continuous-usage", action="store_true",
                   help="ask for usage in every chunk (vLLM continuous_usage_stats): exact per-chunk tokens")
    c.add_argument("--keep-text", action="store_true", help="record each response's text in the records")
    c.add_argument("--temperature", type=float, default=None, help="sampling temperature sent (0: greedy)")
    c.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    c.add_argument("--api-key-file", help="file whose first line is the API key")
    c.add_argument("--ca-file", help="CA bundle for https")
    c.add_argument("--insecure", action="store_true", help="do not verify the server certificate")
    c.add_argument("--goodput", nargs="*", metavar="KEY:MS", help="SLOs for request_goodput, e.g. ttft:500 e2el:2000")
    c.add_argument("--percentiles", help="comma-separated, default 50,90,95,99")
    c.add_argument("--label", help="label stored in the summary")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress line")


def _add_trace_gen(sub: Any) -> None:
    t = sub.add_parser("trace-gen", help="write a synthetic hash-id trace (Mooncake JSONL) with a given reuse",
                       description="Write a hash-id trace in the Mooncake FAST'25 JSONL format: each request has "
                       "about BLOCKS blocks; with probability REUSE its first PREFIX_BLOCKS blocks are one of "
                       "PREFIXES shared prefixes, the rest are new. Poisson arrivals at RATE. Seeded: the same "
                       "options give the same file. Prints the trace's expected reuse.")
    t.add_argument("--out", required=True, type=Path, metavar="FILE", help="JSONL file to write")
    t.add_argument("--requests", type=int, default=100)
    t.add_argument("--block-size", type=int, default=512, help="tokens per block (Mooncake 512, Bailian 16)")
    t.add_argument("--blocks", type=int, default=8, help="blocks per request (mean)")
    t.add_argument("--spread", type=float, default=0.0, help="blocks uniform in BLOCKS*[1-s, 1+s]")
    t.add_argument("--prefix-blocks", type=int, default=4, help="blocks of a shared prefix")
    t.add_argument("--prefixes", type=int, default=4, help="shared prefixes in the pool")
    t.add_argument("--reuse", type=float, default=0.5, help="probability a request starts with a shared prefix")
    t.add_argument("--rate", type=float, default=1.0, help="arrivals per second (Poisson)")
    t.add_argument("--output-length", type=int, default=16)
    t.add_argument("--no-partial", action="store_true", help="every last block is full")
    t.add_argument("--time-unit", choices=["ms", "s"], default="ms")
    t.add_argument("--lru-blocks", type=int, default=0, help="tier size in blocks for the printed expected reuse")
    t.add_argument("--seed", type=int, default=0)


def _add_summarize(sub: Any) -> None:
    s = sub.add_parser("summarize", help="print a run's summary (or a vllm bench serve result file)",
                       description="Print the summary of DIR (summary.json, recomputed from records.jsonl when "
                       "missing) or of a vllm bench serve --save-result JSON file.")
    s.add_argument("path", type=Path, metavar="PATH", help="a run directory or a JSON result file")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.add_argument("--recompute", action="store_true", help="recompute from records.jsonl")


def build_parser(prog: str = "load") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="kvgate load generator")
    configure(p)
    return p


def config_from_args(args: argparse.Namespace) -> LoadConfig:
    wl = args.workload
    params: dict[str, Any] = {}
    for param, opt in _WORKLOAD_OPTS[wl].items():
        value = getattr(args, opt)
        if value is not None:
            params[param] = value
    return LoadConfig(
        endpoint=args.endpoint, model=args.model, api=args.api, workload=wl, workload_params=params,
        seed=args.seed, concurrency=args.concurrency, request_rate=args.request_rate,
        burstiness=args.burstiness, num_requests=None if wl == "random" else args.num_requests,
        duration_s=args.duration, ramp_up_s=args.ramp_up, run_warmup=not args.no_warmup,
        timeout_s=args.timeout, idle_timeout_s=args.idle_timeout, ignore_eos=not args.no_ignore_eos,
        continuous_usage=args.continuous_usage, api_key_env=args.api_key_env, api_key_file=args.api_key_file,
        keep_text=args.keep_text,
        extra_body={} if args.temperature is None else {"temperature": args.temperature},
        ca_file=args.ca_file, insecure_tls=args.insecure, goodput=_goodput(args.goodput),
        percentiles=_percentiles(args.percentiles), progress=not args.quiet, label=args.label,
        prompt_format=args.prompt_format.replace("-", "_"))


def _stat_prefix(key: str, metric: str) -> bool:
    head = key[: -len(f"_{metric}_ms")]
    return head in ("mean", "median") or (head.startswith("p") and head[1:].replace(".", "").isdigit())


def format_summary(s: Summary) -> str:
    d = s.data
    lines = ["{:=^56}".format(f" Serving benchmark result ({s.source}) ")]

    def row(label: str, key: str, fmt: str = "{:.2f}") -> None:
        v = d.get(key)
        if v is not None:
            lines.append(f"{label:<42} {fmt.format(v) if isinstance(v, (int, float)) else v}")

    row("Successful requests:", "completed", "{}")
    row("Failed requests:", "failed", "{}")
    row("Cancelled requests:", "cancelled", "{}")
    row("Maximum request concurrency:", "max_concurrency", "{}")
    row("Benchmark duration (s):", "duration")
    row("Total input tokens:", "total_input_tokens", "{}")
    row("Total generated tokens:", "total_output_tokens", "{}")
    row("Request throughput (req/s):", "request_throughput")
    row("Request goodput (req/s):", "request_goodput")
    row("Output token throughput (tok/s):", "output_throughput")
    row("Total token throughput (tok/s):", "total_token_throughput")
    row("Peak concurrent requests:", "max_concurrent_requests", "{}")
    for metric, name in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2EL"),
                         ("client_queue_time", "client queue")):
        keys = [k for k in d if k.endswith(f"_{metric}_ms") and _stat_prefix(k, metric)]
        if not keys:
            continue
        lines.append("{:-^56}".format(f" {name} "))
        for k in keys:
            lines.append(f"{k.split('_', 1)[0].capitalize() + ' ' + name + ' (ms):':<42} {d[k]:.2f}")
    if d.get("mean_prompt_build_ms") is not None:
        lines.append("{:-^56}".format(" prompt construction "))
        row("Mean prompt build (ms):", "mean_prompt_build_ms")
        row("Max prompt build (ms):", "max_prompt_build_ms")
    turns = d.get("ttft_by_turn") or {}
    if turns:
        lines.append("{:-^56}".format(" TTFT by session turn "))
        for t, v in turns.items():
            lines.append(f"{'Turn ' + t + ' median TTFT (ms), n=' + str(v.get('completed')) + ':':<42} "
                         f"{v.get('median_ttft_ms') or 0.0:.2f}")
    kinds = d.get("errors_by_kind") or {}
    if kinds:
        lines.append("{:-^56}".format(" errors "))
        examples = d.get("error_examples") or {}
        for k, n in sorted(kinds.items()):
            lines.append(f"{k + ':':<42} {n}  e.g. {examples.get(k, '')[:120]}")
    kv = d.get("kvgate") or {}
    if kv.get("interrupted"):
        lines.append(f"interrupted ({kv.get('signal') or 'stop requested'}): everything taken so far is kept")
    lines.append("=" * 56)
    return "\n".join(for_terminal(line) for line in lines)  # an error example is the server's text


def _summarize(args: argparse.Namespace, out: TextIO) -> int:
    import json

    path: Path = args.path
    if path.is_dir():
        sfile, rfile = path / SUMMARY_FILE, path / RECORDS_FILE
        if sfile.exists() and not args.recompute:
            summary = Summary.load(sfile)
        elif rfile.exists():
            recs = read_records(rfile)
            measured = [r for r in recs if r.get("phase", "measure") == "measure"]
            starts = [int(r["start_ns"]) for r in measured]
            ends = [int(r["start_ns"] + (r.get("e2el_ms") or 0.0) * 1e6) for r in measured]
            duration = (max(ends) - min(starts)) / 1e9 if measured else 0.0
            summary = Summary.from_records(measured, duration_s=duration,
                                           extra={"recomputed_from": str(rfile), "duration_from": "record span"})
        else:
            raise LoadInputError(f"{path}: neither {SUMMARY_FILE} nor {RECORDS_FILE} found")
    else:
        summary = Summary.load(path)
    if args.json:
        out.write(json.dumps(summary.data, indent=2) + "\n")
    else:
        out.write(format_summary(summary) + "\n")
        if summary.source == "vllm":
            n = len(records_from_vllm(summary.data))
            out.write(f"(imported from vllm bench serve; {n} per-request records in the file)\n")
    return int(ExitCode.OK)


def dispatch(args: argparse.Namespace, out: Optional[TextIO] = None) -> int:
    """Run a parsed ``load`` command; raises ``KvgateError`` for user errors and faults."""
    out = out or sys.stdout
    if args.load_command == "run":
        cfg = config_from_args(args)
        summary = run_load(cfg, args.out)
        out.write(format_summary(summary) + "\n")
        out.write(f"records: {args.out / RECORDS_FILE}\nsummary: {args.out / SUMMARY_FILE}\n")
        if summary.get("kvgate", {}).get("interrupted"):
            return int(ExitCode.INTERRUPTED)
        if summary["completed"] == 0 and summary["failed"]:
            return int(ExitCode.INFRA_FAULT)  # every request failed: the endpoint is not serving
        return int(ExitCode.OK)
    if args.load_command == "summarize":
        return _summarize(args, out)
    if args.load_command == "trace-gen":
        return _trace_gen(args, out)
    raise LoadInputError("expected a subcommand: run, summarize or trace-gen (see --help)")


def _trace_gen(args: argparse.Namespace, out: TextIO) -> int:
    spec = TraceGenSpec(requests=args.requests, block_size=args.block_size, blocks=args.blocks, spread=args.spread,
                        prefix_blocks=args.prefix_blocks, prefixes=args.prefixes, reuse=args.reuse, rate=args.rate,
                        output_length=args.output_length, partial=not args.no_partial, time_unit=args.time_unit,
                        seed=args.seed)
    spec.check()
    if args.lru_blocks < 0:
        raise LoadInputError(f"--lru-blocks {args.lru_blocks}: expected >= 0")
    try:
        with open(args.out, "w", encoding="utf-8") as f:
            n = write_trace(spec, f)
    except OSError as exc:
        raise LoadInputError(f"trace-gen: cannot write {args.out}: {exc.strerror or exc}") from None
    reqs = parse_trace(args.out, block_size=spec.block_size, time_unit=spec.time_unit)  # as a replay reads it
    est = expected_reuse(((r.input_length, r.hash_ids) for r in reqs), spec.block_size, args.lru_blocks)
    cap = f"an LRU of {args.lru_blocks} blocks" if args.lru_blocks else "an unbounded LRU"
    out.write(f"wrote {n} requests to {args.out}; expected reuse under {cap}: {est.ratio:.1%} "
              f"({est.reused_tokens} of {est.prompt_tokens} prompt tokens)\n")
    return int(ExitCode.OK)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``load ...`` in the node agent; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else int(ExitCode.USAGE_ERROR)
    try:
        return dispatch(args)
    except KvgateError as exc:
        print(f"load: error: {exc}", file=sys.stderr)
        return int(exc.exit_status)
    except KeyboardInterrupt:
        print("load: interrupted; results taken so far are kept", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
