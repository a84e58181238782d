"""The released gate files of this kvgate (issue 51): ``released_gates.json`` in this package holds
the sha256 of each file of ``gates/`` as the package was built (``setup.py``; ``tools/release_gates.py``
in a checkout). A gate file is "stock" only when it has its gate's released digest, so a checkout's
``gates/G3.yaml`` edited in place is not stock. Stdlib only: the package build imports it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Optional

__all__ = ["RELEASED_FILE", "released_digest", "released_document"]

RELEASED_FILE = "released_gates.json"
FORMAT = "kvgate-released-gates-v1"


def released_document(gates: Path) -> str:
    """The JSON text of ``released_gates.json`` for the gate files in ``gates`` (``G<n>.yaml``)."""
    files = {p.stem: {"file": p.name, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
             for p in sorted(Path(gates).glob("G*.yaml"))}
    return json.dumps({"format": FORMAT, "gates": files}, indent=2, sort_keys=True) + "\n"


def released_digest(gate: str) -> Optional[str]:
    """The released sha256 of ``gate``'s file (None: this kvgate released no such gate, or the
    package carries no digests)."""
    try:
        doc = json.loads((Path(__file__).parent / RELEASED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entry = doc.get("gates", {}).get(gate) if isinstance(doc, dict) and doc.get("format") == FORMAT else None
    sha = entry.get("sha256") if isinstance(entry, dict) else None
    return sha if isinstance(sha, str) else None
