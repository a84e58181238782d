"""The history index: every campaign under a reports directory, with each gate's verdict, read
from ``campaign.json`` and the ``result.json`` files alone (no lock: readers never block a run)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from harness.store.campaign import Campaign, CampaignError, ResultFileError, load_result

__all__ = ["CampaignSummary", "list_campaigns"]

_GATE_DIR = re.compile(r"^G[1-9][0-9]?\Z")


@dataclass
class CampaignSummary:
    name: str
    path: Path
    started_at: str = ""
    operator: Optional[str] = None
    kvgate_version: str = ""
    git_commit: Optional[str] = None
    profile: str = ""
    gates: dict[str, str] = field(default_factory=dict)  # gate -> verdict, "running", or why unreadable
    problem: str = ""


def list_campaigns(root: Path) -> list[CampaignSummary]:
    """Campaigns under ``root``, oldest first; a damaged one is listed with its problem."""
    out: list[CampaignSummary] = []
    if not root.is_dir():
        return out
    for d in sorted(p for p in root.iterdir() if p.is_dir() and (p / "campaign.json").exists()):
        s = CampaignSummary(name=d.name, path=d)
        try:
            meta = Campaign.read(root, d.name).meta
        except CampaignError as exc:
            s.problem = str(exc)
            out.append(s)
            continue
        s.started_at = str(meta.get("started_at", ""))
        s.operator = meta.get("operator")
        s.kvgate_version = str(meta.get("kvgate_version", ""))
        s.git_commit = meta.get("git_commit")
        s.profile = str((meta.get("profile") or {}).get("path", ""))
        gate_dirs = [p for p in d.iterdir() if p.is_dir() and _GATE_DIR.match(p.name)]
        for g in sorted(gate_dirs, key=lambda p: int(p.name[1:])):
            if not (g / "result.json").exists():
                s.gates[g.name] = "running" if (g / "state.jsonl").exists() else "no result"
                continue
            try:
                s.gates[g.name] = load_result(g / "result.json").verdict.value
            except ResultFileError as exc:
                s.gates[g.name] = f"unreadable: {exc}"
        out.append(s)
    out.sort(key=lambda s: (s.started_at, s.name))
    return out
