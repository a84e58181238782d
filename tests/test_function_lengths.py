"""#31 item 2: no function in harness/ over 100 lines (`make lint` runs tools/function_lengths.py);
the checker measures what it says (a def's first to last line, methods and nested functions by name)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

import function_lengths  # noqa: E402


def _function(name: str, body_lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(body_lines))
    return f"{indent}def {name}() -> None:\n{body}"


def test_lengths_are_def_to_last_line_with_qualified_names(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("@staticmethod\n" + _function("top", 99) + "\n\nclass C:\n" + _function("meth", 3, "    ")
                   + "\n\ndef outer() -> None:\n" + _function("inner", 2, "    "))
    got = {f.name: f.length for f in function_lengths.measure(src)}
    assert got == {"top": 100, "C.meth": 4, "outer": 4, "outer.<locals>.inner": 3}


def test_a_function_over_the_limit_fails_and_one_at_it_passes(tmp_path: Path) -> None:
    at = tmp_path / "at"
    at.mkdir()
    (at / "a.py").write_text(_function("fits", 99))
    assert function_lengths.main([str(at)]) == 0
    over = tmp_path / "over"
    over.mkdir()
    (over / "b.py").write_text(_function("too_long", 100))
    assert function_lengths.main([str(over)]) == 1


def test_no_function_in_harness_is_over_100_lines() -> None:
    res = subprocess.run([sys.executable, str(REPO / "tools" / "function_lengths.py"), "harness"], cwd=REPO,  # noqa: S603
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_make_lint_runs_the_check() -> None:
    recipe = (REPO / "Makefile").read_text().split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "tools/function_lengths.py harness" in recipe
