"""Build the agent zipapp, reproducibly: members in sorted order, fixed timestamps and modes, so
the same sources always give the same bytes and the same sha256 (how ``deploy`` decides whether
a node already has it)."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import harness

AGENT_NAME = "kvgate-agent.pyz"
SHEBANG = b"#!/usr/bin/env python3\n"
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
# Stdlib-only modules the bundled packages import (harness.errors backs the load errors).
_MODULES = ("__init__.py", "units.py", "progress.py", "errors.py", "exitcodes.py", "deletion.py", "readbuffer.py",
            "terminaltext.py")
_PACKAGES = ("load", "sim", "agent")
_MAIN = b"import sys\nfrom harness.agent.main import main\nsys.exit(main())\n"


def source_files(root: Path | None = None) -> list[tuple[str, Path]]:
    """``(archive name, source path)`` of everything bundled, sorted."""
    base = root or Path(harness.__file__).resolve().parent
    out = [(f"harness/{m}", base / m) for m in _MODULES]
    for pkg in _PACKAGES:
        d = base / pkg
        if not d.is_dir():
            continue  # harness/sim is optional
        for p in d.rglob("*.py"):
            if "__pycache__" not in p.parts:
                out.append((f"harness/{p.relative_to(base).as_posix()}", p))
    return sorted(out)


def build_bytes(root: Path | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        def add(name: str, data: bytes) -> None:
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3
            zf.writestr(info, data, compresslevel=9)

        add("__main__.py", _MAIN)
        for name, path in source_files(root):
            add(name, path.read_bytes())
    return SHEBANG + buf.getvalue()


def build_zipapp(dest_dir: Path) -> Path:
    """Write ``dest_dir/kvgate-agent.pyz`` (replaced atomically) and return its path."""
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / AGENT_NAME
    data = build_bytes()
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(data)
    tmp.chmod(0o755)
    tmp.replace(target)
    return target


def sha256_of(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
