"""Validate a set of files together: each on its own, then the cross-file checks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from harness.config.crosscheck import check_controller_files, check_gate, check_inventory, check_profile
from harness.config.gatespec import GateSpec
from harness.config.inventory import Inventory
from harness.config.loader import load_any
from harness.config.profile import Profile
from harness.config.yamlsource import YamlDocument
from harness.errors import ConfigError, ConfigErrors


@dataclass
class ValidationReport:
    ok: list[tuple[str, str]] = field(default_factory=list)
    errors: list[ConfigError] = field(default_factory=list)
    # every file that parsed: (path, kind, document, model), for checks of later layers (plan-time checks)
    loaded: list[tuple[str, str, YamlDocument, BaseModel]] = field(default_factory=list)


def validate_files(paths: Sequence[str], kind: str | None = None) -> ValidationReport:
    """Validate every file; never raises for a bad file, collects every problem instead."""
    report = ValidationReport()
    loaded: list[tuple[str, str, YamlDocument, BaseModel]] = []
    for path in paths:
        try:
            k, doc, model = load_any(path, kind)
        except ConfigErrors as exc:
            report.errors.extend(exc.errors)
            continue
        except ConfigError as exc:
            report.errors.append(exc)
            continue
        loaded.append((path, k, doc, model))
    report.loaded = list(loaded)
    inventories = [m for _, _, _, m in loaded if isinstance(m, Inventory)]
    gates = [m for _, _, _, m in loaded if isinstance(m, GateSpec)]
    if not gates:
        gates = _shipped_gates()
    for path, k, doc, model in loaded:
        problems: list[ConfigError] = []
        if isinstance(model, Inventory):
            problems = check_inventory(model, doc, path) + check_controller_files(model, doc, path)
        elif isinstance(model, GateSpec):
            problems = check_gate(model, doc, path)
        elif isinstance(model, Profile):
            problems = check_profile(model, inventories, gates, doc, path)
        if problems:
            report.errors.extend(problems)
        else:
            report.ok.append((path, k))
    return report


def _shipped_gates() -> list[GateSpec]:
    """The gate files of this checkout, so profile overrides can be checked on their own."""
    from harness.config.gatespec import GateSpec
    from harness.config.loader import load_model
    from harness.paths import gates_dir

    out: list[GateSpec] = []
    d = gates_dir()
    if d is None:
        return out
    for p in sorted(d.glob("G*.yaml")):
        try:
            out.append(load_model(p, GateSpec))
        except (ConfigError, ConfigErrors):
            continue
    return out
