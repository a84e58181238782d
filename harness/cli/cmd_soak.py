"""``kvgate soak status|stop CAMPAIGN [--json]``: look into a running G4 soak, or end it early."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any, Optional

from harness.cli.table import terminal_safe
from harness.exitcodes import EXIT_CODE_HELP


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "soak",
        help="look into a running G4 soak (status) or end it early (stop)",
        description="status: reattach to the campaign's soak by its saved handle, pull what it wrote since "
        "the last look (unless a `kvgate gate G4` is following it, which keeps the files current) and "
        "print elapsed/remaining time, the last windows' figures and any check already failing. "
        "stop: ask the soak to end now (G4 then FAILs `duration` unless the profile's duration was reached); "
        "finish the gate with `kvgate gate G4 --resume`.",
        epilog="exit codes:\n" + EXIT_CODE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", choices=["status", "stop"])
    p.add_argument("campaign", help="campaign name (a folder under the reports root)")
    p.add_argument("--reports", type=Path, default=None, help="reports root (default: reports/)")
    p.add_argument("--inventory", type=Path, default=None,
                   help="inventory YAML (default: the file the campaign was started with)")
    p.add_argument("--gates", type=Path, default=None, help="directory of the gate files (default: gates/)")
    p.add_argument("--no-pull", action="store_true", help="status: only what was already pulled (no SSH)")
    p.add_argument("--json", action="store_true", help="status as JSON")
    p.set_defaults(func=run)


def _inventory(camp: Any, given: Optional[Path]) -> Any:
    from harness.config.loader import load_inventory
    from harness.errors import InputError

    path = given or Path(str((camp.meta.get("inventory") or {}).get("path") or ""))
    if not str(path) or not path.exists():
        raise InputError(f"the inventory of campaign {camp.name!r} ({path or 'unknown'}) is not here; pass --inventory")
    return load_inventory(path)


def status(campaign: str, *, reports: Optional[Path] = None, inventory: Optional[Path] = None,
           gates: Optional[Path] = None, pull_now: bool = True) -> dict[str, Any]:
    """The soak's status as a dict (what ``--json`` prints)."""
    from harness.errors import InputError
    from harness.load.soak import DONE
    from harness.paths import reports_dir
    from harness.pipelines.g4.soakrun import WATCH_DIR, SoakHandle, WatchHandle, read_local_json, read_local_jsonl
    from harness.store.campaign import Campaign, GateDir

    root = reports or reports_dir()
    camp = Campaign.read(root, campaign)
    gd = GateDir(camp.path / "G4", "G4", create=False)
    state = gd.step_done("soak/start")
    if not state:
        raise InputError(f"campaign {campaign!r} has no started G4 soak (run `kvgate gate G4` first)")
    local = Path(gd.evidence_path("soak"))
    sh = SoakHandle.from_json(state["handle"])
    sh.local_dir = str(local)
    wh: Optional[WatchHandle] = None
    if state.get("watch"):
        wh = WatchHandle.from_json(state["watch"])
        wh.local_dir = str(local / WATCH_DIR)
    notes: list[str] = []
    running = _pull_unless_followed(camp, inventory, sh, wh, notes) if pull_now else None
    windows = read_local_jsonl(local / "windows.jsonl")
    done = read_local_json(local / DONE)
    if done is not None:
        running = False
    started = float(state["started_unix"])
    total = float(state["duration_s"])
    elapsed = (float(done["ended_unix"]) if done else time.time()) - started
    measured, charts, overrides = _measured_so_far(camp, state, local, watched=wh is not None)
    return {
        "campaign": campaign, "node": sh.node, "running": running, "ended": done,
        "elapsed_s": round(elapsed, 1), "duration_s": total, "remaining_s": round(max(0.0, total - elapsed), 1),
        "eta_unix": round(started + total, 1), "windows": len(windows),
        "warmup_s": float(state.get("warmup_s") or 0.0),
        "last_windows": windows[-3:], "failing": _failing(gates, measured, overrides, ended=done is not None),
        "faults": charts["faults"][-10:], "notes": notes,
    }


def _pull_unless_followed(camp: Any, inventory: Optional[Path], sh: Any, wh: Any, notes: list[str]) -> Optional[bool]:
    """Pull what the soak (and the engine node's watchdog) wrote since the last look, unless a gate
    run is following the soak; whether the soak still runs (None: not known)."""
    from harness.store.campaign import Campaign, CampaignLocked

    lock: Optional[int]
    try:
        # The campaign lock tells whether a gate run is following the soak (it pulls; two
        # pullers appending to the same files would duplicate lines). Taken, not recorded.
        lock = Campaign._lock(camp.path)
    except CampaignLocked:
        notes.append("a kvgate gate G4 run is following this soak: showing what it pulled")
        return None
    try:
        return _pull(_inventory(camp, inventory), sh, wh, notes, camp.path / "G4")
    finally:
        os.close(lock)


def _pull(inv: Any, sh: Any, wh: Any, notes: list[str], gate_path: Path) -> Optional[bool]:
    from harness.pipelines.g4.soakrun import pull, pull_watch
    from harness.pipelines.shared.context import RAY_ACTORS
    from harness.remote.base import RemoteError
    from harness.remote.connect import executor_for

    running: Optional[bool] = None
    try:
        ex = executor_for(inv, sh.node, ray_actors=gate_path / RAY_ACTORS)  # the actors G4's run created
        try:
            running = pull(ex, sh).state.running
        finally:
            ex.close()
    except (RemoteError, OSError) as exc:
        notes.append(f"could not reach {sh.node}: {exc} (showing what was pulled before)")
    if wh is not None:  # the engine node's own watchdog (engine on another node)
        try:
            wex = executor_for(inv, wh.node, ray_actors=gate_path / RAY_ACTORS)
            try:
                pull_watch(wex, wh)
            finally:
                wex.close()
        except (RemoteError, OSError) as exc:
            notes.append(f"could not reach the engine node {wh.node}: {exc} (restarts as pulled before)")
    return running


def _measured_so_far(camp: Any, state: dict[str, Any], local: Path, *,
                     watched: bool) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """G4's measured tree and charts from what was pulled, and the profile's G4 overrides."""
    from harness.pipelines.g4.soakdata import soak_measured
    from harness.pipelines.g4.soakrun import WATCH_DIR

    overrides: list[Any] = []
    level: dict[str, Any] = {}
    prof_path = Path(str((camp.meta.get("profile") or {}).get("path") or ""))
    if str(prof_path) and prof_path.is_file():
        from harness.config.loader import load_profile

        prof = load_profile(prof_path)
        overrides = [o for o in prof.overrides if o.gate == "G4"]
        level = {"concurrency": prof.soak.concurrency, "request_rate": prof.soak.request_rate}
    measured, charts = soak_measured(local, duration_target_s=float(state["duration_s"]),
                                     window_s=float(state["window_s"]),
                                     nvme=state.get("nvme") or [], md_arrays=state.get("md_arrays") or [],
                                     engine_watched=bool(state.get("engine_watched")),
                                     warmup_s=float(state.get("warmup_s") or 0.0),
                                     accel_tools=state.get("accel_tools") or [],
                                     watch=local / WATCH_DIR if watched else None,
                                     engine_node=str(state.get("server") or ""),
                                     health_from_watch=bool(state.get("health_on_engine_node")),
                                     instances=len(state.get("instances") or [state.get("instance")]), **level)
    return measured, charts, overrides


def _failing(gates: Optional[Path], measured: dict[str, Any], overrides: list[Any], *,
             ended: bool) -> list[dict[str, Any]]:
    """The G4 checks already failing on what was measured so far."""
    from harness.config.loader import load_gate
    from harness.gates.evaluate import evaluate_gate
    from harness.paths import gates_dir

    failing: list[dict[str, Any]] = []
    gate_file = Path(gates or gates_dir() or "gates") / "G4.yaml"
    if gate_file.exists():
        for c in evaluate_gate(load_gate(gate_file), measured, overrides=overrides):
            if c.id == "duration" and not ended:
                continue  # not reached yet is not a failure while it runs
            if c.verdict.value in ("FAIL", "ERROR"):
                failing.append({"id": c.id, "verdict": c.verdict.value,
                                "measured": c.observations[0].measured_text if c.observations else None})
    return failing


def _fmt_s(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"


def _say(line: str) -> None:
    # node-written strings (fault descriptions, notes, check ids) reach the terminal clean
    print(terminal_safe(line))


def run(args: argparse.Namespace) -> int:
    if args.action == "stop":
        return _stop(args)
    st = status(args.campaign, reports=args.reports, inventory=args.inventory, gates=args.gates,
                pull_now=not args.no_pull)
    if args.json:
        print(json.dumps(st, indent=2, default=str))
        return 0
    state = "ended (" + str((st["ended"] or {}).get("reason")) + ")" if st["ended"] else \
        ("running" if st["running"] else "state unknown" if st["running"] is None else "not running")
    eta = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(st["eta_unix"]))
    _say(f"G4 soak of {st['campaign']} on {st['node']}: {state}")
    _say(f"  elapsed {_fmt_s(st['elapsed_s'])} of {_fmt_s(st['duration_s'])}, remaining "
          f"{_fmt_s(st['remaining_s'])} (ETA {eta}), {st['windows']} windows closed")
    if st["warmup_s"]:
        _say(f"  warm-up: the first {_fmt_s(st['warmup_s'])} of load, left out of the drift checks")
    for w in st["last_windows"]:
        p50, p99 = w.get("ttft_p50_ms"), w.get("ttft_p99_ms")
        _say(f"  window {w.get('index')}: {w.get('ok')} ok, {w.get('failed')} failed, TTFT p50 "
              f"{'-' if p50 is None else f'{p50:.0f}'} / p99 {'-' if p99 is None else f'{p99:.0f}'} ms, "
              f"{float(w.get('throughput_tok_s') or 0):.1f} tok/s")
    for f in st["failing"]:
        _say(f"  FAILING already: {f['id']} ({f['measured']})")
    for f in st["faults"]:
        _say(f"  fault at +{f['t_s']:.0f} s: {f['kind']}: {str(f['what'])[:150]}")
    for n in st["notes"]:
        _say(f"  note: {n}")
    return 0


def _stop(args: argparse.Namespace) -> int:
    from harness.errors import InputError
    from harness.paths import reports_dir
    from harness.pipelines.g4.soakrun import SoakHandle, request_stop
    from harness.remote.connect import executor_for
    from harness.store.campaign import Campaign, GateDir

    camp = Campaign.read(args.reports or reports_dir(), args.campaign)
    state = GateDir(camp.path / "G4", "G4", create=False).step_done("soak/start")
    if not state:
        raise InputError(f"campaign {args.campaign!r} has no started G4 soak")
    sh = SoakHandle.from_json(state["handle"])
    from harness.pipelines.shared.context import RAY_ACTORS

    ex = executor_for(_inventory(camp, args.inventory), sh.node, ray_actors=camp.path / "G4" / RAY_ACTORS)
    try:
        request_stop(ex, sh)
    finally:
        ex.close()
    print(f"asked the soak of {args.campaign} on {sh.node} to stop; finish the gate with `kvgate gate G4 --resume`")
    return 0
