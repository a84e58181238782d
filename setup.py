"""The package build writes the released gate digests from ``gates/`` into the package (issue 51):
``harness/gates/released_gates.json`` is what "stock" means for the kvgate that runs. Everything
else is in pyproject.toml."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        root = Path(__file__).resolve().parent
        spec = importlib.util.spec_from_file_location("_released", root / "harness" / "gates" / "released.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        target = Path(self.build_lib) / "harness" / "gates" / module.RELEASED_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(module.released_document(root / "gates"), encoding="utf-8")


setup(cmdclass={"build_py": BuildPy})
