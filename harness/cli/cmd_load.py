"""``kvgate load``: run the load generator against an OpenAI-compatible endpoint, or summarize a run.

Parsing and work are delegated to ``harness.load.cli`` (the same parser the node agent uses)."""

from __future__ import annotations

import argparse

from harness.load import cli as load_cli


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "load", help="run the load generator against an OpenAI-compatible endpoint",
        description="Streaming load generator: workloads random, shared-prefix, multi-round, long-doc, "
        "trace, hash-trace (Mooncake/Bailian hash-id traces, with trace-gen); closed or open loop; "
        "per-request records and a summary with vllm bench serve key names.")
    load_cli.configure(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return load_cli.dispatch(args)
