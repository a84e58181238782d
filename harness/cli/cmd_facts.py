"""``kvgate facts``: what each node of an inventory really carries, as a table or as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from harness.cli.table import render_table
from harness.config.loader import load_inventory
from harness.exitcodes import ExitCode
from harness.facts.fanout import (
    FACTS_HEADERS,
    NodeUnreachable,
    collect_inventory_facts,
    facts_json,
    facts_rows,
    storage_problems,
)
from harness.progress import Progress
from harness.terminaltext import for_terminal


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "facts",
        help="collect node facts (accelerators, NVMe, RAID, mounts, links, RDMA, versions)",
        description="Collect the facts G1 compares with the inventory: accelerators (amd-smi/rocm-smi, "
        "npu-smi, nvidia-smi), NVMe drives, RAID, storage targets, link speed, RoCE GIDs, OS and "
        "software versions. A tool missing on a node is reported, not an error. Exit 4 when a node "
        "cannot be reached or a storage target's directory does not exist.",
    )
    p.add_argument("--inventory", required=True, metavar="FILE", help="inventory YAML")
    p.add_argument("--node", action="append", metavar="NAME", help="only this node (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON: facts and the G1 comparison per node")
    p.add_argument("--raw", action="store_true", help="with --json: include every command's raw output")
    p.add_argument("--accept-new-host-keys", action="store_true",
                   help="trust-on-first-use: accept and record unknown SSH host keys "
                   "(changed keys are refused)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    inventory = load_inventory(args.inventory)
    names = args.node or [n.name for n in inventory.nodes]
    with Progress("facts", total=len(names), enabled=not args.json) as progress:
        results = collect_inventory_facts(inventory, nodes=names,
                                          accept_new_host_keys=args.accept_new_host_keys, progress=progress)
    if args.json:
        print(json.dumps(facts_json(inventory, results, raw=args.raw), indent=2, sort_keys=True))
    else:
        # what a node's commands printed (its OS name, versions, errors) is shown inert, a line each
        rows = [[for_terminal(c) for c in row] for row in facts_rows(results)]
        print(render_table(FACTS_HEADERS, rows))
        for name, r in results.items():
            if not isinstance(r, NodeUnreachable) and r.errors:
                print(f"\n{name}: facts not collected", file=sys.stderr)
                for cmd, why in r.errors.items():
                    print(f"  {for_terminal(cmd)}: {for_terminal(why)}", file=sys.stderr)
    unreachable = [n for n, r in results.items() if isinstance(r, NodeUnreachable)]
    for n in unreachable:
        print(f"kvgate: {n} unreachable: {for_terminal(results[n].error)}", file=sys.stderr)  # type: ignore[union-attr]
    storage = storage_problems(inventory, results)
    for line in storage:
        print(f"kvgate: {for_terminal(line)}", file=sys.stderr)
    if unreachable or storage:
        return int(ExitCode.INFRA_FAULT)
    return int(ExitCode.OK)
