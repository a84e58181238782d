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
from harness.probes import session, tables
from harness.probes.registry import PROBES, get_probe
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


def _fio_options(f: argparse.ArgumentParser) -> None:
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


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "probe",
        help="storage probes: fio, checkpoint write, model load",
        description="Storage probes on each node: fio bandwidth/IOPS/latency (direct I/O), checkpoint "
        "write (R1) and model load (R9). Raw outputs and results.json are written under --out.",
    )
    kinds = p.add_subparsers(dest="probe", metavar="PROBE")
    for kind in PROBES.values():  # one subcommand per registered probe
        k = kinds.add_parser(kind.name, help=kind.help, description=kind.description)
        _common(k, required=kind.name != "fio")
        k.set_defaults(func=run, probe=kind.name)
        if kind.name == "fio":
            _fio_options(k)
    p.set_defaults(func=_no_kind, parser=p)


def _no_kind(args: argparse.Namespace) -> int:
    args.parser.print_help()
    return int(ExitCode.USAGE_ERROR)


def run(args: argparse.Namespace) -> int:
    if args.probe == "fio" and args.parse:
        outputs = tables.parse_saved(args.parse)
        if args.json:
            print(json.dumps(tables.parsed_json(outputs), indent=2))
        else:
            print(render_table(tables.PARSE_HEADERS, tables.parsed_rows(outputs)))
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
        print(render_table(tables.FIO_HEADERS, tables.fio_cluster_rows(report.results)))
        print(f"\nresults: {report.results_path}")
        report.raise_for_failures()
        return int(ExitCode.OK)
    if args.probe == "fio":
        with Progress("probe fio") as progress:
            report = session.probe_fio(inventory, profile, out_dir, node=args.node, target=args.target,
                                       accept_new_host_keys=args.accept_new_host_keys, progress=progress)
        print(render_table(tables.FIO_HEADERS, tables.fio_rows(report.results)))
    else:
        kind = get_probe(args.probe)
        with Progress(f"probe {args.probe}") as progress:
            report = session.probe_single(args.probe, inventory, profile, out_dir, node=args.node,
                                          target=args.target, accept_new_host_keys=args.accept_new_host_keys,
                                          progress=progress)
        if kind.rows is not None:
            print(render_table(*kind.rows(report.results)))
    print(f"\nresults: {report.results_path}")
    report.raise_for_failures()
    return int(ExitCode.OK)
