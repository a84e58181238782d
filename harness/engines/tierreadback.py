"""Read back the directory an engine really uses for its disk tier and compare it with the plan
(issue 33 item 4): the environment is clean, but a tier that moved (an override the scrub did not
foresee, a config file the engine did not read) must not be measured under the planned tier's name.

Where the engine says it:
- the emulator: ``kvgate_sim:tier_dir_info{tier="local_disk",path=...}`` on its /metrics;
- in-process LMCache (0.5.6): ``Local disk cache path: <dir>`` in the engine's log, one line per
  TP rank (``lmcache/v1/storage_backend/local_disk_backend.py``);
- multiprocess LMCache (0.5.6): ``Created FS native L2 adapter: <base_path> (workers=...`` in the
  LMCache server's log (``lmcache/v1/distributed/l2_adapters/fs_native_l2_adapter.py``), which the
  emulator's server writes too; the planned L2 directory is the instance's KV directory.
A mismatch stops the engine's start (EngineStartError): every point of that arm is then an error,
never a measurement. A real engine whose log does not carry the line is not refused, but the
returned record says ``read_back: false``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

from harness.engines.base import EngineInstance, EngineStartError
from harness.remote.base import RemoteError
from harness.remote.local import runs_on_this_machine
from harness.sim.lmcache_config import parse_flat_yaml

if TYPE_CHECKING:
    from harness.engines.base import Engine

_LOG_LINE = re.compile(r"Local disk cache path: (\S+)")
_L2_LOG_LINE = re.compile(r"Created FS native L2 adapter: (.+?) \(workers=")


def planned_disk_dir(instance: EngineInstance) -> Optional[str]:
    """The ``local_disk`` directory of the plan's LMCache file (None: no in-process disk tier)."""
    plan = instance.plan
    path = plan.env.get("LMCACHE_CONFIG_FILE")
    if not path or path not in plan.files:
        return None
    value = parse_flat_yaml(plan.files[path], path).get("local_disk")
    if not isinstance(value, str) or not value.startswith("file://"):
        return None
    return _norm(value[len("file://"):])


def _norm(path: str) -> str:
    return path.rstrip("/") or "/"


def effective_disk_dirs(engine: Engine, instance: EngineInstance) -> Optional[list[str]]:
    """The disk-tier directories the engine reports (None: it does not say)."""
    if instance.plan.kind == "sim":
        snap = engine.scrape_metrics(instance)
        return [_norm(s.label("path") or "") for s in snap.samples("kvgate_sim:tier_dir_info", tier="local_disk")
                if s.value > 0]
    found: list[str] = []
    for stream in ("stdout", "stderr"):
        text = _log_text(instance, stream)
        found += [_norm(m.group(1)) for m in _LOG_LINE.finditer(text)]
    return found or None


def planned_l2_dir(instance: EngineInstance) -> Optional[str]:
    """The L2 directory of the instance's LMCache server (None: multiprocess mode without an L2)."""
    plan = instance.plan
    side = plan.sidecar
    if side is None or "--l2-adapter" not in side.argv or not plan.kv_dirs:
        return None
    return _norm(plan.kv_dirs[0])


def effective_l2_dirs(instance: EngineInstance) -> Optional[list[str]]:
    """The L2 directories the LMCache server's log names (None: it names none)."""
    if instance.sidecar_handle is None:
        return None
    found: list[str] = []
    for stream in ("stdout", "stderr"):
        found += [_norm(m.group(1)) for m in _L2_LOG_LINE.finditer(_log_text(instance, stream, sidecar=True))]
    return found or None


def _log_text(instance: EngineInstance, stream: str, limit: int = 4 << 20, *, sidecar: bool = False) -> str:
    """The start of an engine log (LMCache logs its tier path at start-up), or of its LMCache
    server's with ``sidecar``. On the controller's own node it is read in-process: no process is
    forked next to a running measurement."""
    handle = instance.sidecar_handle if sidecar and instance.sidecar_handle is not None else instance.handle
    if runs_on_this_machine(instance.executor):
        try:
            with open(handle.stdout_path if stream == "stdout" else handle.stderr_path, "rb") as fh:
                return fh.read(limit).decode("utf-8", "replace")
        except OSError:
            return ""
    try:
        return instance.executor.tail_log(handle, stream=stream, lines=20000)
    except RemoteError:
        return ""


def check_tier_dirs(engine: Engine, instance: EngineInstance) -> dict[str, object]:
    """Compare the engine's disk tier (multiprocess: its LMCache server's L2) with the plan's;
    raises EngineStartError on a mismatch."""
    l2 = planned_l2_dir(instance)
    if l2 is not None:
        return _compare(instance, l2, effective_l2_dirs(instance), "LMCache server's L2 directory")
    planned = planned_disk_dir(instance)
    if planned is None:
        return {"planned": None, "read_back": False}
    return _compare(instance, planned, effective_disk_dirs(engine, instance), "engine's disk tier")


def _compare(instance: EngineInstance, planned: str, seen: Optional[list[str]], what: str) -> dict[str, object]:
    if seen is None:
        return {"planned": planned, "read_back": False}
    wrong = sorted({d for d in seen if d != planned})
    if wrong or not seen:
        plan = instance.plan
        raise EngineStartError(
            f"the {what} is {', '.join(wrong) or 'absent'}, not the planned {planned}: its "
            "measurements would not be of the tier under test", node=plan.node, command=plan.argv)
    return {"planned": planned, "read_back": True, "effective": sorted(set(seen))}
