"""Print the mutation score of the last ``mutmut run`` (``make mutation``), per file and overall.

Reads ``mutants/**/*.meta`` (mutmut 3's result files). Killed = a test failed (or timed out, or
the type checker caught it); every other checked mutant (survived, no test ran it, suspicious)
counts against the score. Mutants never checked are listed apart and left out.
"""

from __future__ import annotations

import fnmatch
import json
import sys
from collections import Counter
from pathlib import Path

import tomllib

KILLED = {1, 3, 24, -24, 152, 255, 36, 37}
SURVIVED = {0}
NOT_CHECKED = {None}


def _scope() -> list[str]:
    """The ``only_mutate`` patterns of pyproject.toml's [tool.mutmut] (empty: everything)."""
    with open("pyproject.toml", "rb") as fh:
        return list(tomllib.load(fh).get("tool", {}).get("mutmut", {}).get("only_mutate", []))


def main() -> int:
    scope = _scope()
    metas = sorted(m for m in Path("mutants").rglob("*.py.meta")
                   if not scope or any(fnmatch.fnmatch(m.relative_to("mutants").as_posix()[:-5], p) for p in scope))
    if not metas:
        print("no mutmut results under mutants/ (run `make mutation`)")
        return 1
    print(f"scope (pyproject.toml [tool.mutmut] only_mutate): {', '.join(scope) or 'everything'}")
    outside = sorted(p.as_posix() for p in Path("harness/gates").glob("*.py") if p.name != "__init__.py"
                     if scope and not any(fnmatch.fnmatch(p.as_posix(), s) for s in scope))
    if outside:
        print(f"outside the scope, not counted: {', '.join(outside)}")
    total: Counter[str] = Counter()
    for meta in metas:
        codes = json.loads(meta.read_text()).get("exit_code_by_key", {})
        c: Counter[str] = Counter()
        for code in codes.values():
            c["killed" if code in KILLED else "survived" if code in SURVIVED
              else "not checked" if code in NOT_CHECKED else "other"] += 1
        if not codes:
            continue
        total.update(c)
        checked = c["killed"] + c["survived"] + c["other"]
        score = 100.0 * c["killed"] / checked if checked else 0.0
        name = meta.relative_to("mutants").as_posix().removesuffix(".meta")
        print(f"{name:40} {score:5.1f}% killed ({c['killed']}/{checked}; survived {c['survived']}, "
              f"no test or suspicious {c['other']}, not checked {c['not checked']})")
    checked = total["killed"] + total["survived"] + total["other"]
    score = 100.0 * total["killed"] / checked if checked else 0.0
    print(f"{'mutation score':40} {score:5.1f}% killed ({total['killed']}/{checked}); "
          f"target >= 90%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
