"""Write ``harness/gates/released_gates.json``: the sha256 of each gate file in ``gates/``, the
released rule book of this kvgate version (issue 51). A result's gate file is "stock" only when
it has the digest released for its gate, whatever the checkout holds. Run by the package build
(``setup.py``'s ``build_py``) and by hand after changing ``gates/``; a test fails when it is stale."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.gates.released import RELEASED_FILE, released_document  # noqa: E402


def main() -> int:
    out = ROOT / "harness" / "gates" / RELEASED_FILE
    out.write_text(released_document(ROOT / "gates"), encoding="utf-8")
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
