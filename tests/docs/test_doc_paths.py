"""#31 item 5: every repository path the docs name exists (README.md and docs/**/*.md).

What counts as a path: a backticked word with a slash whose first part is a top-level folder of the
repository (`harness/...`, `tests/...`, `tools/...`, `gates/...`, `profiles/...`, `.ci/...`) or a
package of harness/ written from inside it (`pipelines/shared/sweep.py`, `facts/parsers/`): the
latter may stand at the root or under harness/. A `*` is a glob that must match something;
`<name>`, `{a,b}` and `...` mark a placeholder and are not checked; `reports/...` is what a run
writes, not a repository file. An attribute is written with dots (`pipelines.g4.soakrun.pull`, not
`pipelines/g4/soakrun.pull`); a dotted name written from the root
(`harness.store.durable.atomic_write`) must import and have the attributes it names (dotted names
without `harness.` are left alone: `load.workload` is a profile key).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOPS = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".") and "egg-info" not in p.name
        } | {".ci"}
PACKAGES = {p.name for p in (REPO / "harness").iterdir() if (p / "__init__.py").is_file()}
RUN_OUTPUT = {"reports"}
PATH = re.compile(r"`((?:\.ci|[a-z_][a-z0-9_.-]*)/[A-Za-z0-9_./*<>{},-]*)`")
DOTTED = re.compile(r"`(harness(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def _docs() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _exists(path: str) -> bool:
    first = path.split("/")[0]
    places = ([path] if first in TOPS else []) + ([f"harness/{path}"] if first in PACKAGES else [])
    return any(any(REPO.glob(p.rstrip("/"))) if "*" in p else (REPO / p).exists() for p in places)


def _named_paths() -> list[tuple[str, str]]:
    out = []
    for md in _docs():
        for n, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
            for m in PATH.finditer(line):
                path = m.group(1)
                first = path.split("/")[0]
                if first in RUN_OUTPUT or (first not in TOPS and first not in PACKAGES):
                    continue
                if any(mark in path for mark in ("<", "{", "...")):
                    continue
                out.append((f"{md.relative_to(REPO)}:{n}", path))
    return out


def _module_resolves(dotted: str) -> bool:
    """The longest module prefix is a file of harness/; what follows is an attribute chain of it (a
    pydantic model's field counts as its attribute)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:i])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            obj: object = importlib.import_module(".".join(parts[:i]))
            for name in parts[i:]:
                fields = getattr(obj, "model_fields", None) or getattr(obj, "__dataclass_fields__", None) or {}
                if not hasattr(obj, name) and name not in fields:
                    return False
                obj = getattr(obj, name, None)
            return True
    return False


def test_the_docs_name_many_paths() -> None:
    assert len(_named_paths()) > 150  # the pattern still finds what the docs name


def test_every_path_the_docs_name_exists() -> None:
    missing = [f"{where}: {path}" for where, path in _named_paths() if not _exists(path)]
    assert missing == [], "\n".join(missing)


def test_every_harness_module_the_docs_name_exists() -> None:
    missing = []
    for md in _docs():
        for n, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
            for m in DOTTED.finditer(line):
                if not _module_resolves(m.group(1)):
                    missing.append(f"{md.relative_to(REPO)}:{n}: {m.group(1)}")
    assert missing == [], "\n".join(missing)


def test_a_stale_path_is_caught() -> None:
    assert _exists("harness/pipelines/shared/sweep.py") and _exists("pipelines/shared/sweep.py")
    assert _exists("gates/G*.yaml")
    assert not _exists("harness/pipelines/no_such_module.py") and not _exists("pipelines/g4/soakrun.pull")
    assert not _exists("harness/pipelines/sweep.py")  # the flat layout before #31
    assert _module_resolves("harness.pipelines.g4.soakrun.pull")
    assert not _module_resolves("harness.pipelines.no_such.thing")
    assert not _module_resolves("harness.pipelines.g4.soakrun.no_such_function")
