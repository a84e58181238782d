"""What a test may accept from the storage protocol on this machine's virtual disk.

The gates' bandwidth checks are decided only once fio's rounds are steady (SNIA: the last 5 within
20% range and 10% slope); on a VM's disk shared with other work (two demos at once, the emulator's
own restores) they may never be, and the honest verdict is then INCONCLUSIVE, never PASS. A test
whose subject is not the storage figure accepts exactly that, and nothing else, in place of PASS.
"""

from __future__ import annotations

from typing import Any

NOT_STEADY = "steady state NOT reached"


def not_passed_beyond_unsteady_storage(checks: list[dict[str, Any]], allowed: frozenset[str] = frozenset(), *,
                                       blockers_only: bool = True) -> list[str]:
    """The ids of (blocker) checks that neither PASSed, nor are in ``allowed``, nor are INCONCLUSIVE
    because their fio rounds never reached steady state (the reason says so)."""
    return [c["id"] for c in checks
            if (c.get("severity") == "blocker" or not blockers_only)
            and c["verdict"] not in ("PASS", "NOT_APPLICABLE") and c["id"] not in allowed
            and not (c["verdict"] == "INCONCLUSIVE" and NOT_STEADY in (c.get("reason") or ""))]
