"""A ``vllm`` executable that starts the KV emulator, so the real vLLM launcher (the engines
layer's vLLM adapter) can be exercised end to end where vLLM cannot run.

``python -m harness.sim.vllm_shim serve MODEL ...`` behaves like ``vllm serve``;
``write_vllm_shim(directory, python)`` installs a ``vllm`` script in ``directory`` (put it first on
PATH, or pass it as the engine command).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

SHIM_VERSION = "0.0.0+kvgate.sim"


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["--version"], ["-v"]):
        print(SHIM_VERSION)
        return 0
    if args[:1] != ["serve"]:
        print(
            "vllm (kvgate emulator shim): only `vllm serve MODEL ...` and `vllm --version` are emulated",
            file=sys.stderr,
        )
        return 2
    from harness.sim.cli import main as sim_main

    return sim_main(args)


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


if __name__ == "__main__":
    sys.exit(main())
