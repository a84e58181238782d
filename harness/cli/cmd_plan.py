"""``kvgate plan --inventory I --profile P [--arm A]``: print what a run would do on every node,
before anything is touched: the exact commands (engine, LMCache server, Ray), environment (secrets
masked), files, KV directories and the cold-restore steps of the engine's node, then every node's
part (Ray workers, load client, G1's probes), nodes alike printed once. An arm whose cold restore
would empty the tier under test, or a model that does not fit the accelerators, is refused here
(exit 2), as `kvgate validate` and G2/G3 refuse it."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from harness.cli.plannodes import grouped
from harness.config import load_inventory, parse_model
from harness.config.profile import Profile
from harness.config.yamlsource import load_yaml
from harness.engines import get_engine
from harness.engines.coldrestore import cold_restore_plan
from harness.engines.preflight import load_client, plan_problems, server_and_peers
from harness.estimate.fit import fit_errors
from harness.exitcodes import ExitCode
from harness.redact import redact_data


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "plan",
        help="print the engine commands, files and cold-restore steps of a run, touching nothing",
        description="Print, for every arm (or --arm) and engine instance on the inventory's first server "
        "node, the exact engine command, the LMCache server command (multiprocess mode), Ray commands, "
        "environment (secrets masked), files and the cold-restore steps; then what every node of the "
        "inventory runs (Ray workers, load client, G1 probes), nodes alike grouped. Nothing is run. Exit 2 "
        "on what `kvgate validate` refuses: an arm's cold restore that would not keep the tier under test, "
        "a model that does not fit the accelerators, any plan-time refusal.",
    )
    p.add_argument("--inventory", required=True, metavar="FILE", help="inventory YAML")
    p.add_argument("--profile", required=True, metavar="FILE", help="profile YAML")
    p.add_argument("--arm", action="append", metavar="NAME", help="only this arm (repeatable)")
    p.add_argument("--json", action="store_true", help="print the plans as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    inventory = load_inventory(args.inventory)
    doc = load_yaml(args.profile)
    profile = parse_model(doc, Profile)
    server, peers = server_and_peers(inventory, profile)
    if server is None:
        print(f"kvgate: error: inventory {args.inventory} has no node with role 'server'", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)
    unfit, fit_notes = fit_errors(profile, doc, args.profile, inventory)
    problems = unfit + plan_problems(profile, doc, args.profile, inventory)
    if problems:  # the messages `kvgate validate` prints for the same files
        for err in problems:
            print(f"error    {err.message}", file=sys.stderr)
        print(f"kvgate: {len(problems)} problem(s): nothing planned", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)
    client = load_client(inventory, server)
    engine = get_engine(profile.engine.kind)
    arms = [profile.arm(a) for a in args.arm] if args.arm else list(profile.arms)
    out: list[dict[str, Any]] = []
    for arm in arms:
        restore = cold_restore_plan(profile, arm) if profile.load.cold_restore else None
        for i in range(profile.model.instances_per_node):
            plan = engine.plan(server, profile, arm, i, python=str(inventory.setting(server, "python")),
                               workdir=str(inventory.setting(server, "workdir")), peers=peers)
            data = redact_data(plan.to_json())
            data["load_client"] = client.name
            data["load_url"] = plan.url_for(client.name)  # refuses an engine a remote client cannot reach
            data["cold_restore"] = restore.with_sidecar(plan.sidecar).to_json() if restore else None
            out.append(data)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for data in out:
            _print(data)
        print("\n".join(grouped(inventory, server, out, client.name)))
        for note in fit_notes:
            print(f"note:    {note}")
    return int(ExitCode.OK)


def _print(d: dict[str, Any]) -> None:
    print(f"== arm {d['arm']} / instance {d['instance_index']} on {d['node']} ({d['platform']}) ==")
    print(f"engine:  {shlex.join(d['argv'])}")
    for k, v in sorted(d["env"].items()):
        print(f"  env    {k}={v}")
    side = d.get("sidecar")
    if side:
        print(f"lmcache: {shlex.join(side['argv'])}")
    ray = d.get("ray")
    if ray:
        for node, argv in ray["commands"]:
            print(f"ray:     [{node}] {shlex.join(argv)}")
        for node, items in ray["env"]:  # what every raylet, so every Ray worker, inherits
            for k, v in items:
                print(f"  ray env [{node}] {k}={v}")
    for path, content in d["files"].items():
        print(f"file:    {path}")
        for line in str(content).splitlines():
            print(f"  | {line}")
    for kv in d["kv_dirs"]:
        print(f"kv dir:  {kv}")
    print(f"url:     {d['load_url']} (load client on {d['load_client']})")
    restore = d.get("cold_restore")
    if restore:
        for n, step in enumerate(restore["steps"], start=1):
            print(f"restore: {n}. {step}")
    for note in d["notes"]:
        print(f"note:    {note}")
    print()
