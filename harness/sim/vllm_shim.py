"""A ``vllm`` executable that starts the KV emulator, so the real vLLM launcher (the engines
layer's vLLM adapter) can be exercised end to end where vLLM cannot run.

``python -m harness.sim.vllm_shim serve MODEL ...`` behaves like ``vllm serve``;
``write_vllm_shim(directory, python)`` installs a ``vllm`` script in ``directory`` (put it first on
PATH, or pass it as the engine command).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Optional

from harness.sim.cli import main as sim_main
from harness.sim.shimfile import SHIM_VERSION, write_vllm_shim  # noqa: F401  (re-exported)


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
    return sim_main(args)


if __name__ == "__main__":
    sys.exit(main())
