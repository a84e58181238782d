"""Writes the ``vllm`` shim script (see ``vllm_shim``): a ``vllm`` executable that runs the KV emulator."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Optional

SHIM_VERSION = "0.0.0+kvgate.sim"


def write_vllm_shim(
    directory: str | os.PathLike[str], python: str = sys.executable, *, zipapp: Optional[str] = None
) -> Path:
    """Write an executable ``vllm`` script into ``directory`` that runs the emulator with ``python``
    (from this source tree, or from the agent ``zipapp`` when given); returns its path."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / "vllm"
    if zipapp is not None:
        run = f'exec {shlex.quote(python)} -I -S {shlex.quote(zipapp)} sim "$@"'
    else:
        root = str(Path(__file__).resolve().parents[2])
        run = (
            f"PYTHONPATH={shlex.quote(root)}${{PYTHONPATH:+:$PYTHONPATH}}; export PYTHONPATH\n"
            f'exec {shlex.quote(python)} -m harness.sim.vllm_shim "$@"'
        )
    text = (
        "#!/bin/sh\n"
        "# kvgate test shim: NOT vLLM. Runs kvgate's KV emulator with vLLM's command line.\n"
        f'if [ "$1" = "--version" ]; then echo {SHIM_VERSION}; exit 0; fi\n'
        f"{run}\n"
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.chmod(0o755)
    tmp.replace(path)
    return path
