"""Finding 6: YAML denial of service.

Billion-laughs aliases took 26 s and 4 GB then a traceback (exit 1); deep nesting gave a
RecursionError (exit 5); a 100,000-digit integer exited 5. Each is now exit 2 with file:line,
in well under a second of parsing."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.config.yamlsource import load_yaml
from harness.errors import ConfigError
from tests.support.procs import HANG_GUARD_S


def _laughs() -> str:
    lines = ["cluster: c", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\nnodes: [{name: n, host: h, connection: local}]\n"


CASES = {
    "laughs": (_laughs(), r"values once aliases are expanded", 2),
    "deep-flow": ("cluster: c\nx: " + "[" * 5000 + "]" * 5000 + "\n", r"nested deeper than 64", 2),
    "deep-map": ("cluster: c\nx: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n", r"nested deeper than 64", 2),
    "deep-block": ("cluster: c\n" + "".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v: 1\n",
                   r"nested deeper than 64", 65),
    "bigint": ("cluster: c\nx: " + "9" * 100_000 + "\nnodes: []\n", r"integer of 100000 characters", 2),
    "many-aliases": ("cluster: c\na: &a 1\nl: [" + ", ".join(["*a"] * 500) + "]\n", r"more than 100 aliases", 3),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_yaml_is_refused_fast_with_a_location(tmp_path: Path, name: str) -> None:
    text, message, line = CASES[name]
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    start = time.process_time()
    with pytest.raises(ConfigError, match=message) as info:
        load_yaml(p)
    assert time.process_time() - start < 1.0
    assert info.value.line == line and info.value.path == str(p)


def test_cli_exits_2_without_traceback(tmp_path: Path) -> None:
    p = tmp_path / "laughs.yaml"
    p.write_text(_laughs())
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "validate", str(p)],  # noqa: S603
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout
    assert f"{p}:2:" in proc.stdout + proc.stderr


def test_small_reuse_still_works(tmp_path: Path) -> None:
    p = tmp_path / "ok.yaml"
    p.write_text("base: &b {x: 1, y: 2}\none: {<<: *b, z: 3}\ntwo: *b\nbig: 12345678901234567890\n")
    doc = load_yaml(p)
    assert doc.data["one"] == {"x": 1, "y": 2, "z": 3} and doc.data["two"] == {"x": 1, "y": 2}
