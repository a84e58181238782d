"""The gate file a result was decided by, as evidence: its path, its sha256, and whether it is
the file released with this kvgate version (its digest ships in the package: ``released.py``).
A gate file is the rule book: with ``--gates DIR`` anyone can lower a threshold, demote a blocker
to advisory or drop a check, and the result would otherwise say only the new value in its
"expected" column. So every result records the file, and a non-stock one carries every difference
from the released file, check by check, for page one.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Optional

from harness import __version__
from harness.config.gatespec import Check, GateSpec
from harness.errors import KvgateError
from harness.gates.released import released_digest

__all__ = ["gate_file_notes", "gate_file_record", "shipped_gates_dir", "spec_differences"]


def shipped_gates_dir() -> Optional[Path]:
    """The gate files that ship with this kvgate (the checkout's ``gates/``), or None."""
    here = Path(__file__).resolve().parent.parent.parent / "gates"
    return here if here.is_dir() else None


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _check_differences(old: Check, new: Check) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if old.severity != new.severity:
        kind = "blocker_demoted" if old.severity == "blocker" else "promoted_to_blocker"
        out.append({"kind": kind, "check": new.id, "text": f"{new.id}: severity {old.severity} -> {new.severity}"
                    + (" (a blocker demoted: it no longer decides the gate)" if kind == "blocker_demoted" else "")})
    for attr in ("threshold", "comparator", "metric", "compared_tokens"):
        a, b = getattr(old, attr), getattr(new, attr)
        if a != b:
            out.append({"kind": f"{attr}_changed", "check": new.id, "text": f"{new.id}: {attr} {a} -> {b}"})
    if old.statistic != new.statistic:
        out.append({"kind": "statistic_changed", "check": new.id,
                    "text": f"{new.id}: statistic {old.statistic.model_dump()} -> {new.statistic.model_dump()}"})
    if old.description != new.description:
        out.append({"kind": "description_changed", "check": new.id, "text": f"{new.id}: description changed"})
    return out


def spec_differences(stock: GateSpec, used: GateSpec) -> list[dict[str, Any]]:
    """Every difference of ``used`` from ``stock``: checks removed (a removed blocker named as
    such), added, demoted or changed; prerequisites and title."""
    out: list[dict[str, Any]] = []
    old = {c.id: c for c in stock.checks}
    new = {c.id: c for c in used.checks}
    for cid, c in old.items():
        if cid not in new:
            kind = "blocker_removed" if c.severity == "blocker" else "check_removed"
            was = "a blocker" if c.severity == "blocker" else "advisory"
            out.append({"kind": kind, "check": cid, "text": f"{cid}: removed (it was {was})"})
        else:
            out += _check_differences(c, new[cid])
    for cid, c in new.items():
        if cid not in old:
            out.append({"kind": "check_added", "check": cid, "text": f"{cid}: added ({c.severity})"})
    if stock.prerequisites != used.prerequisites:
        out.append({"kind": "prerequisites_changed", "check": None,
                    "text": f"prerequisites {stock.prerequisites} -> {used.prerequisites}"})
    if stock.title != used.title or stock.description != used.description:
        out.append({"kind": "title_changed", "check": None, "text": "gate title or description changed"})
    return out


def _reference(name: str, released: str) -> Optional[Path]:
    """A file with the released content to list differences against: the checkout's ``gates/``
    file of that name, only when it still has the released digest."""
    shipped_dir = shipped_gates_dir()
    candidate = shipped_dir / name if shipped_dir is not None else None
    if candidate is not None and candidate.is_file() and _sha256(candidate) == released:
        return candidate
    return None


def gate_file_record(path: Path, used: GateSpec) -> dict[str, Any]:
    """``result.json: gate_files[i]``: path, sha256, ``stock`` (True: it has the digest released
    for its gate with this kvgate, ``harness/gates/released.py``; False: not, whatever the checkout
    holds; None: this kvgate released no file for the gate) and ``differences``."""
    from harness.config.loader import load_gate

    path = Path(path).resolve()
    record: dict[str, Any] = {"gate": used.id, "path": str(path), "sha256": _sha256(path)}
    released = released_digest(used.id)
    if released is None:
        record.update(stock=None, stock_path=None, stock_sha256=None, differences=[])
        return record
    reference = _reference(f"{used.id}.yaml", released)
    record.update(stock_path=str(reference) if reference else None, stock_sha256=released,
                  kvgate_version=__version__)
    record["stock"] = record["sha256"] == released
    if record["stock"]:
        record["differences"] = []
        return record
    if reference is None:  # the checkout's file was edited too: the released text is not at hand
        record["differences"] = [{"kind": "released_not_at_hand", "check": None,
                                  "text": f"not the {used.id} file released with kvgate {__version__} (sha256 "
                                  f"{released[:16]}); the checkout's gates/{used.id}.yaml differs from it too, so "
                                  "the differences cannot be listed check by check"}]
        return record
    try:
        diffs = spec_differences(load_gate(reference), used)
    except KvgateError as exc:  # a broken shipped file: say so, never hide the non-stock file
        diffs = [{"kind": "stock_unreadable", "check": None, "text": f"the shipped file cannot be read: {exc}"}]
    record["differences"] = diffs or [{"kind": "formatting_only", "check": None,
                                       "text": "no difference in checks (comments or formatting only)"}]
    return record


def gate_file_notes(records: list[dict[str, Any]]) -> list[str]:
    """One note per non-stock gate file, naming every difference."""
    return [f"NON-STOCK GATE FILE {r['path']} (sha256 {r['sha256'][:16]}, shipped "
            f"{str(r.get('stock_sha256'))[:16]}): " + "; ".join(d["text"] for d in r.get("differences", []))
            for r in records if r.get("stock") is False]
