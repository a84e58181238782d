"""``kvgate ping --inventory FILE``: reach every node in parallel and show what is there."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from harness.cli.table import render_table
from harness.config.loader import load_inventory
from harness.remote.ping import PingResult, ping_inventory, raise_for_unreachable, ray_mapping, unclaimed_lines
from harness.terminaltext import for_terminal


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "ping",
        help="check every node of an inventory: reachability, latency, OS, python, fio, clock",
        description="Connect to every node of the inventory in parallel and print: node, reachable, "
        "round-trip latency of a trivial command, user, OS, python version, fio, and the node's clock "
        "offset against this controller. Host keys are verified against known_hosts. For `connection: "
        "ray` nodes, also the Ray node each one maps to; a node no live Ray node matches is unreachable, "
        "and Ray nodes no inventory node claims are named. Exit 4 when any node is unreachable (each one "
        "named with its reason).",
    )
    p.add_argument("--inventory", "-i", required=True, metavar="FILE", help="inventory YAML file")
    p.add_argument("--json", action="store_true", help="print JSON (one object per node) instead of a table")
    p.add_argument("--accept-new-host-keys", action="store_true",
                   help="trust-on-first-use: accept and record unknown host keys (a changed key is "
                   "always refused)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="give up on nodes that have not answered after this long (default: none)")
    p.add_argument("--max-workers", type=int, default=16, metavar="N", help="nodes pinged at once (16)")
    p.set_defaults(func=run)


def _fmt(value: float | None, digits: int = 1) -> str | None:
    return None if value is None else f"{value:.{digits}f}"


def _table(results: list[PingResult]) -> str:
    rows = []
    ray = any(r.ray_node for r in results)
    for r in results:
        clock = None
        if r.clock_offset_ms is not None:
            clock = f"{r.clock_offset_ms:+.1f} ms (±{r.clock_uncertainty_ms:.1f})"
        rows.append([r.node, "yes" if r.reachable else "NO", _fmt(r.rtt_ms), r.user, r.os, r.python,
                     (r.fio or "absent") if r.reachable else None, clock, *([r.ray_node] if ray else []),
                     r.error or None])
    # every cell but the first two came from the node (or its error): shown inert, on one line
    safe = [[None if c is None else for_terminal(c) for c in row] for row in rows]
    return render_table(["node", "reachable", "rtt ms", "user", "os", "python", "fio", "clock offset",
                         *(["ray node"] if ray else []), "error"], safe)


def run(args: argparse.Namespace) -> int:
    inventory = load_inventory(args.inventory)
    results = ping_inventory(inventory, accept_new_host_keys=args.accept_new_host_keys,
                             max_workers=args.max_workers, timeout=args.timeout,
                             progress=sys.stderr.isatty())
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=2))
    else:
        print(_table(results))
    for line in unclaimed_lines(ray_mapping(inventory)):
        print(f"note: {for_terminal(line)}", file=sys.stderr)
    raise_for_unreachable([dataclasses.replace(r, error=for_terminal(r.error)) for r in results])
    return 0
