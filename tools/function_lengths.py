"""Function lengths over a tree (`make lint` runs it over harness/): no function over 100 lines.

A function's length is ``end_lineno - lineno + 1`` of its ``def`` node (decorators not counted,
its docstring and nested functions counted: a nested function is also measured on its own).
The house rule (docs/ARCHITECTURE.md, "A map"): functions under ~60 lines, none over 100, split by
meaning (a function per step, a small data class for what a step returns), not by cutting at a line.

    python tools/function_lengths.py harness            # fail on any function over 100 lines
    python tools/function_lengths.py harness --list 60  # list every function over 60 lines
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

LIMIT = 100
# Functions allowed over LIMIT for now, as "path::qualified name". Each entry needs its reason;
# the list only shrinks (an entry no longer over the limit fails the check until it is taken off).
ALLOWED: dict[str, str] = {}


@dataclass(frozen=True)
class FunctionLength:
    path: str
    name: str  # qualified: Class.method, outer.<locals>.inner
    line: int
    length: int

    @property
    def key(self) -> str:
        return f"{self.path}::{self.name}"


def _walk(node: ast.AST, prefix: str, path: str, out: list[FunctionLength]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{child.name}"
            end = child.end_lineno if child.end_lineno is not None else child.lineno
            out.append(FunctionLength(path, name, child.lineno, end - child.lineno + 1))
            _walk(child, f"{name}.<locals>.", path, out)
        elif isinstance(child, ast.ClassDef):
            _walk(child, f"{prefix}{child.name}.", path, out)
        else:
            _walk(child, prefix, path, out)


def measure(root: Path) -> list[FunctionLength]:
    """Every function under ``root`` (a .py file or a folder), longest first."""
    files = [root] if root.is_file() else sorted(root.rglob("*.py"))
    out: list[FunctionLength] = []
    for f in files:
        _walk(ast.parse(f.read_text(), filename=str(f)), "", f.as_posix(), out)
    return sorted(out, key=lambda fl: (-fl.length, fl.path, fl.line))


def over(functions: list[FunctionLength], limit: int) -> list[FunctionLength]:
    return [f for f in functions if f.length > limit]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("roots", nargs="+", type=Path)
    ap.add_argument("--limit", type=int, default=LIMIT, help="fail on a function longer than this (default 100)")
    ap.add_argument("--list", type=int, metavar="N", help="only list the functions over N lines; never fails")
    args = ap.parse_args(argv)
    functions = [f for root in args.roots for f in measure(root)]
    functions.sort(key=lambda fl: (-fl.length, fl.path, fl.line))
    if args.list is not None:
        shown = over(functions, args.list)
        for f in shown:
            print(f"{f.length:4d}  {f.path}:{f.line}  {f.name}")
        print(f"{len(shown)} functions over {args.list} lines ({len(functions)} functions)")
        return 0
    long = over(functions, args.limit)
    bad = [f for f in long if f.key not in ALLOWED]
    for f in long:
        tag = "allowed: " + ALLOWED[f.key] if f.key in ALLOWED else "over the limit"
        print(f"{f.path}:{f.line}: {f.name} is {f.length} lines ({tag})")
    measured = {f.path for f in functions}
    stale = sorted(k for k in set(ALLOWED) - {f.key for f in long} if k.split("::")[0] in measured)
    for key in stale:
        print(f"{key}: on the allow-list but no longer over {args.limit} lines: take it off")
    if bad or stale:
        print(f"{len(bad)} functions over {args.limit} lines; split them by meaning", file=sys.stderr)
        return 1
    print(f"function lengths: none over {args.limit} lines outside the allow-list ({len(functions)} functions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
