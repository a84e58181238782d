"""``kvgate probe fio|checkpoint|modelload``: measure what the storage tier delivers on each node,
keeping fio's own output as evidence; ``kvgate probe fio --parse FILE...`` reads saved fio output."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.cli.table import render_table
from harness.config.loader import load_inventory, load_profile
from harness.errors import InputError
from harness.exitcodes import ExitCode
from harness.probes import session
from harness.progress import Progress


def _common(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    p.add_argument("--inventory", required=required, metavar="FILE", help="inventory YAML")
    p.add_argument("--profile", required=required, metavar="FILE", help="profile YAML (its probes section)")
    p.add_argument("--node", metavar="NAME", help="only this node")
    p.add_argument("--target", metavar="NAME", help="only this storage target")
    p.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        help="where raw outputs and results.json go (default: a new folder under reports/)",
    )
    p.add_argument(
        "--accept-new-host-keys",
        action="store_true",
        help="trust-on-first-use: accept and record unknown SSH host keys (changed keys are refused)",
    )


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "probe",
        help="storage probes: fio, checkpoint write, model load",
        description="Storage probes on each node: fio bandwidth/IOPS/latency (direct I/O), checkpoint "
        "write (R1) and model load (R9). Raw outputs and results.json are written under --out.",
    )
    kinds = p.add_subparsers(dest="probe", metavar="PROBE")
    f = kinds.add_parser(
        "fio",
        help="fio job sets on every storage target",
        description="Run the profile's fio job sets (seq-read, seq-write, rand-read, mixed) on each "
        "node's storage targets, nodes in parallel; or, with --parse, parse saved fio JSON/json+ files "
        "(any fio 2.x-3.4x, client/server too) and print the same table.",
    )
    _common(f, required=False)
    f.add_argument(
        "--parse", nargs="+", metavar="FILE", help="parse saved fio output files instead of running fio"
    )
    f.add_argument("--json", action="store_true", help="with --parse: print JSON instead of a table")
    f.add_argument(
        "--client-server",
        action="store_true",
        help="fio's client/server mode: 'fio --server' on every selected node, 'fio --client' from one; "
        "reports the aggregate bandwidth of all nodes at once",
    )
    f.add_argument(
        "--port", type=int, default=8765, help="with --client-server: first fio server port (8765)"
    )
    f.add_argument("--client", metavar="NODE", help="with --client-server: node running fio --client")
    f.set_defaults(func=run, probe="fio")
    c = kinds.add_parser(
        "checkpoint",
        help="checkpoint write: N bytes as M files, parallel writers, fsync",
        description="Write a checkpoint snapshot (probes.checkpoint) on a storage target "
        "of each node, fsync every file and the directory; optional cold read-back.",
    )
    _common(c)
    c.set_defaults(func=run, probe="checkpoint")
    m = kinds.add_parser(
        "modelload",
        help="model load: cold parallel read of a weights directory",
        description="Read a weights directory (or synthetic shards) with parallel readers "
        "after dropping the page cache (root) or with O_DIRECT; results that may include "
        "cached reads are marked.",
    )
    _common(m)
    m.set_defaults(func=run, probe="modelload")
    p.set_defaults(func=_no_kind, parser=p)


def _no_kind(args: argparse.Namespace) -> int:
    args.parser.print_help()
    return int(ExitCode.USAGE_ERROR)


def run(args: argparse.Namespace) -> int:
    if args.probe == "fio" and args.parse:
        outputs = session.parse_saved(args.parse)
        if args.json:
            print(json.dumps(session.parsed_json(outputs), indent=2))
        else:
            print(render_table(session.PARSE_HEADERS, session.parsed_rows(outputs)))
        return int(ExitCode.OK)
    if not args.inventory or not args.profile:
        raise InputError(
            f"kvgate probe {args.probe}: --inventory and --profile are required (or --parse FILE... for fio)"
        )
    inventory = load_inventory(args.inventory)
    profile = load_profile(args.profile)
    out_dir: Path = args.out or session.default_out_dir(args.probe)
    if args.probe == "fio" and args.client_server:
        with Progress("probe fio (client/server)") as progress:
            report = session.probe_fio_cluster(
                inventory,
                profile,
                out_dir,
                node=args.node,
                target=args.target,
                port=args.port,
                client=args.client,
                accept_new_host_keys=args.accept_new_host_keys,
                progress=progress,
            )
        print(render_table(session.FIO_HEADERS, session.fio_cluster_rows(report.results)))
        print(f"\nresults: {report.results_path}")
        report.raise_for_failures()
        return int(ExitCode.OK)
    runner = {
        "fio": session.probe_fio,
        "checkpoint": session.probe_checkpoint,
        "modelload": session.probe_modelload,
    }[args.probe]
    with Progress(f"probe {args.probe}") as progress:
        report = runner(
            inventory,
            profile,
            out_dir,
            node=args.node,
            target=args.target,
            accept_new_host_keys=args.accept_new_host_keys,
            progress=progress,
        )
    if args.probe == "fio":
        print(render_table(session.FIO_HEADERS, session.fio_rows(report.results)))
    elif args.probe == "checkpoint":
        print(render_table(*session.checkpoint_rows(report.results)))
    else:
        print(render_table(*session.modelload_rows(report.results)))
    print(f"\nresults: {report.results_path}")
    report.raise_for_failures()
    return int(ExitCode.OK)
