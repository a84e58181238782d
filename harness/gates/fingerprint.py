"""The workload fingerprint: what must be equal for two runs' figures to be comparable.

A G2 baseline and a G3 candidate are compared only when the fingerprint of the baseline arm
recorded by G2 equals the one the G3 run computes for the same arm from its own inputs. Fields
(flat, dotted names, so a difference is reported field by field):

* ``model.*``: name, KV geometry, tensor parallel size, instances per node, nodes per instance,
  max model length;
* ``engine.*``: kind, version (when known), extra arguments; ``engine.env.*``, the variables the
  profile declares for the engine (secret values masked; the only ones besides kvgate's own that
  reach it, see ``engines/cleanenv.py``), present only when some are declared, so a profile
  without any keeps its older digest; ``engine.sim.*`` (the emulator's compute model) for the
  emulator;
* ``load.*``: the workload kind and every parameter of it, the concurrencies, prompts per point,
  warm-up, repetitions, loop mode and rate, seed, cold-restore protocol, request timeout; for a
  trace workload also ``load.trace_sha256``, the trace file's contents (two traces at one path
  are different workloads);
* ``arm.*``: the arm's name, storage target, offload switch and LMCache settings;
* ``nodes.platforms``: the accelerator platforms of the serving nodes (when the inventory is given);
* ``kvgate.version`` and ``hardware.*``: the harness and the hardware the figures were measured
  on, from the campaign's G1 facts (``harness.gates.hardware``), merged in by the gate runs.

What never enters: descriptions, ports, hosts, the controller's environment variables,
thresholds and overrides, the latency SLO ``load.slo`` and the
expected-reuse LRU size ``load.lru_blocks`` (they change
the judgement, not the figures: an older baseline recorded without them stays comparable).

``fingerprint_digest`` is the sha256 of the canonical JSON (sorted keys, no spaces), so the
nightly history can key a series by it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel

from harness.config.inventory import Inventory
from harness.config.profile import Profile
from harness.gates.hardware import UNKNOWN, serving_nodes
from harness.redact import redact_argv, redact_data

__all__ = ["workload_fingerprint", "fingerprint_digest", "fingerprint_record", "fingerprint_diff",
           "MISSING"]

MISSING = "(not recorded)"


# lru_blocks sizes the LRU the *expected* reuse is computed with: a figure beside the measurement
_JUDGEMENT_ONLY = {"slo", "lru_blocks"}
# the hash-trace replay's own settings: part of the workload only when that is the workload
_HASH_TRACE_ONLY = {"trace_block_size", "trace_time_unit", "trace_max_context", "trace_sample"}


def _canonical(value: Any) -> Any:
    """JSON-able, with dict keys sorted and floats that are whole numbers kept as they are."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _dump(model: BaseModel, exclude: Optional[set[str]] = None) -> dict[str, Any]:
    """A config model as JSON values (enums as their values, dates in ISO form), one way for all."""
    return model.model_dump(mode="json", exclude=exclude)


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping) and value:
        for k in sorted(value):
            _flatten(f"{prefix}.{k}", value[k], out)
    else:
        out[prefix] = _canonical(value)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:  # recorded as such: it never equals a real digest, so nothing compares
        return f"(unreadable: {exc.strerror or exc})"
    return digest.hexdigest()


def workload_fingerprint(profile: Profile, *, arm: str, inventory: Optional[Inventory] = None,
                         engine_version: Optional[str] = None) -> dict[str, Any]:
    """The fingerprint fields of ``arm`` under ``profile`` (see the module doc), flat and canonical."""
    a = profile.arm(arm)
    m = profile.model
    out: dict[str, Any] = {}
    _flatten("model", {
        "name": m.name, "geometry": _dump(m.kv_geometry),
        "tensor_parallel_size": m.tensor_parallel_size, "instances_per_node": m.instances_per_node,
        "nodes_per_instance": m.nodes_per_instance, "max_model_len": m.max_model_len,
    }, out)
    engine: dict[str, Any] = {"kind": profile.engine.kind, "version": engine_version,
                              # secrets masked: result.json is evidence (a changed key is no new workload)
                              "extra_args": redact_argv(list(profile.engine.extra_args))}
    if profile.engine.env:
        engine["env"] = redact_data(dict(profile.engine.env))
    if profile.engine.kind == "sim":
        engine["sim"] = _dump(profile.engine.sim)
    _flatten("engine", engine, out)
    unused = set() if profile.load.workload == "hash-trace" else _HASH_TRACE_ONLY
    _flatten("load", _dump(profile.load, _JUDGEMENT_ONLY | unused), out)
    if profile.load.trace:
        out["load.trace_sha256"] = _file_sha256(Path(profile.load.trace))
    _flatten("arm", {"name": a.name, "storage": a.storage, "offload": a.offload,
                     "lmcache": redact_data(_dump(a.lmcache)) if a.offload else None}, out)
    if inventory is not None:
        out["nodes.platforms"] = sorted({str(n.platform) for n in serving_nodes(inventory)})
    return out


def fingerprint_digest(fp: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON of ``fp``."""
    text = json.dumps(fp, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fingerprint_record(fp: Mapping[str, Any]) -> dict[str, Any]:
    """The ``fingerprint`` object of ``result.json``: ``{"digest": ..., "fields": {...}}``."""
    return {"digest": fingerprint_digest(fp), "fields": dict(fp)}


def fingerprint_diff(recorded: Mapping[str, Any], current: Mapping[str, Any]
                     ) -> list[tuple[str, Any, Any]]:
    """Every field whose value differs, as (field, recorded, current); a field one side lacks is
    :data:`MISSING` there; a field either side holds as not collected (:data:`UNKNOWN`) differs."""
    out = []
    for key in sorted(set(recorded) | set(current)):
        a = recorded.get(key, MISSING)
        b = current.get(key, MISSING)
        if _canonical(a) != _canonical(b) or _unknown(a) or _unknown(b):
            out.append((key, a, b))
    return out


def _unknown(value: Any) -> bool:
    """A value (or a per-node value in a list) that was not collected: never known to be equal."""
    return value == UNKNOWN or (isinstance(value, list) and UNKNOWN in value)

