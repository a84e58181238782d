"""One exit-code table: the node agent's commands (load, sim) use ``harness.exitcodes``, which the
agent bundle carries (it is stdlib only), instead of copies of the numbers."""

from __future__ import annotations

import ast
from pathlib import Path

from harness.agent.bundle import source_files
from harness.exitcodes import ExitCode

REPO = Path(__file__).resolve().parents[2]


def test_bundle_carries_the_exit_code_table() -> None:
    names = {name for name, _ in source_files()}
    assert "harness/exitcodes.py" in names
    # the table it carries is stdlib only: every import is of the standard library or __future__
    tree = ast.parse((REPO / "harness" / "exitcodes.py").read_text())
    mods = {n.module if isinstance(n, ast.ImportFrom) else a.name
            for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
            for a in (n.names if isinstance(n, ast.Import) else [n])}
    assert mods <= {"__future__", "enum"}


def test_agent_clis_define_no_exit_codes_of_their_own() -> None:
    for rel in ("harness/load/cli.py", "harness/sim/cli.py"):
        tree = ast.parse((REPO / rel).read_text())
        own = [t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets
               if isinstance(t, ast.Name) and t.id.startswith("EXIT_")]
        own += [e.id for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Tuple) for e in t.elts if isinstance(e, ast.Name) and e.id.startswith("EXIT_")]
        assert own == [], f"{rel} defines its own exit codes {own}; use harness.exitcodes.ExitCode"
        assert "harness.exitcodes" in (REPO / rel).read_text()


def test_load_cli_usage_error_is_the_table_s_usage_code() -> None:
    from harness.load.cli import main

    assert main(["run", "--no-such-option"]) == int(ExitCode.USAGE_ERROR)
