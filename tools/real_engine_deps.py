"""Write the requirements of installed distributions, minus CUDA-only packages, to a file (runs in a
real-engine venv after its engine and LMCache were installed with --no-deps).

Usage: real_engine_deps.py OUT DIST[:pins|:nopins]...  (pins: keep the version specifiers; LMCache's
strict pins clash with the engine's and are dropped, as tools/ensure-real-engine.sh does).
"""

import importlib.metadata as md
import sys

from packaging.requirements import Requirement

# CUDA-only or CUDA builds that break imports on a CPU machine (torch is installed by the caller).
DROP = {"torch", "torchvision", "torchaudio", "torchcodec", "cupy-cuda13x", "cupy-cuda12x", "cuda-python",
        "cufile-python", "nvtx", "nixl", "triton"}


def requirements(dist: str, keep_pins: bool) -> list[str]:
    out = []
    for text in md.requires(dist) or []:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name.lower().replace("_", "-") in DROP:
            continue
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        out.append(f"{req.name}{extras}{req.specifier if keep_pins else ''}")
    return out


def main(argv: list[str]) -> None:
    lines: list[str] = []
    for spec in argv[2:]:
        dist, _, how = spec.partition(":")
        lines += requirements(dist, how != "nopins")
    with open(argv[1], "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv)
