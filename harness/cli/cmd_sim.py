"""``kvgate sim serve MODEL --port P [vLLM flags] [emulator flags]``: the KV emulator.

An OpenAI-compatible server that accepts vLLM's command line and LMCache's config file, emulates
compute (prefill and decode rates, a bounded batch) and performs real storage I/O for LMCache's
tiers. ``kvgate sim serve --help`` lists the flags. The same code runs on nodes from the agent.
"""

from __future__ import annotations

import argparse

from harness.sim.cli import main as sim_main


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "sim",
        help="the KV emulator (an OpenAI-compatible server with a real storage tier)",
        description="The KV emulator: `kvgate sim serve MODEL --port P [vLLM flags] [emulator flags]`. "
        "Compute is emulated, storage I/O for LMCache's tiers (LMCACHE_CONFIG_FILE) is real. "
        "Run `kvgate sim serve --help` for every flag.",
    )
    p.add_argument(
        "rest", nargs=argparse.REMAINDER, metavar="serve MODEL ...", help="the emulator's command line"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return sim_main(list(args.rest))
