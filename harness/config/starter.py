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


def inventory_text(platform_name: str, hosts: Sequence[str], name: str) -> str:
    p = get_platform(platform_name)
    d = p.defaults
    _check(hosts, name)
    lines = [
        "# yaml-language-server: $schema=../docs/reference/schema/inventory.schema.json",
        f"# Starting inventory for {p.description} written by `kvgate init`. Fill in every TODO, then run",
        f"#   kvgate validate inventory/{name}.yaml && kvgate facts --inventory inventory/{name}.yaml",
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
        lines += [
            "    storage:  # TODO: the tiers to compare (baseline and candidate), mounted on the node",
            "      - {name: baseline-disk, path: /mnt/nvme0, kind: local-nvme}",
            "      - {name: candidate-disk, path: /mnt/candidate, kind: other}",
        ]
        if d.software:
            lines.append("    software:  # expected versions ('*' = present); G1 checks them")
            lines += [f"      {k}: \"{v}\"" for k, v in d.software.items()]
    return "\n".join(lines) + "\n"


def _arm_lines(multiprocess: bool) -> list[str]:
    """Both arms alike but for their storage: a cold restore that keeps the tier under test.

    Multiprocess LMCache keeps its L2 (fs_native) across the L1 clear and a restart; where it cannot
    run (Ascend), in-process LMCache without a CPU tier, whose prefix cache is emptied in place
    (engine.dev_mode), so its disk index (in the engine's memory) survives."""
    if multiprocess:
        lm = ("{mode: multiprocess, chunk_size: 256, mp_l1_size_gb: 50, max_local_disk_size: 500, "
              "extra_config: {use_odirect: true}}")
    else:
        lm = "{chunk_size: 256, local_cpu: false, max_local_disk_size: 500, extra_config: {use_odirect: true}}"
    out = []
    for arm, storage in (("baseline", "baseline-disk"), ("candidate", "candidate-disk")):
        out += [f"  - name: {arm}", f"    storage: {storage}", f"    lmcache: {lm}"]
    return out


def profile_text(platform_name: str, name: str) -> str:
    p = get_platform(platform_name)
    _check(["x"], name)
    tp = max(1, p.defaults.accelerator_count)
    preset = next(iter(GEOMETRY_PRESETS))
    engine = ["engine:", "  kind: vllm", "  port: 8000", "  ready_timeout: 30m"]
    if not p.lmcache_multiprocess:
        engine += ["  dev_mode: true  # POST /reset_prefix_cache empties the prefix cache without a restart, "
                   "which would lose in-process LMCache's disk index (closed networks only)"]
    mode = ("LMCache multiprocess mode: an `lmcache server` per instance, L2 on the storage target"
            if p.lmcache_multiprocess else
            "in-process LMCache without a CPU tier (multiprocess mode does not run on this platform)")
    return "\n".join([
        "# yaml-language-server: $schema=../docs/reference/schema/profile.schema.json",
        f"# Starting profile for {p.description} written by `kvgate init`. Fill in every TODO, then run",
        f"#   kvgate validate profiles/{name}.yaml",
        "# Field reference: docs/reference/profile.md",
        f"name: {name}",
        "description: baseline vs candidate KV tier  # TODO: what this campaign compares",
        "model:",
        "  name: /models/YOUR-MODEL  # TODO: the weights directory on the nodes (or a model id)",
        f"  tensor_parallel_size: {tp}",
        f"  preset: {preset}  # TODO: the KV geometry of your model ({', '.join(GEOMETRY_PRESETS)}) or 'geometry:'",
        "  instances_per_node: 1",
        "  max_model_len: 32768",
        *engine,
        f"arms:  # storage names are the inventory's storage targets; {mode}",
        *_arm_lines(p.lmcache_multiprocess),
        "load:",
        "  workload: shared-prefix",
        "  input_len: 16384",
        "  prefix_len: 12288",
        "  output_len: 128",
        "  concurrency: [8, 16, 32]",
        "  prompts_per_point: 64",
        "  repetitions: 5",
    ]) + "\n"


def starter_files(platform_name: str, hosts: Sequence[str], name: str) -> dict[str, str]:
    """``{"inventory/<name>.yaml": text, "profiles/<name>.yaml": text}``, both parsed and validated
    (an InputError/ConfigError when the generated text is not a valid file: nothing is written)."""
    files = {f"inventory/{name}.yaml": inventory_text(platform_name, hosts, name),
             f"profiles/{name}.yaml": profile_text(platform_name, name)}
    inv_path, prof_path = files
    inv_doc, prof_doc = parse_yaml(files[inv_path], inv_path), parse_yaml(files[prof_path], prof_path)
    inventory = parse_model(inv_doc, Inventory)
    profile = parse_model(prof_doc, Profile)
    errors = check_inventory(inventory, inv_doc, inv_path)
    errors += check_profile(profile, [inventory], [], prof_doc, prof_path)
    if errors:
        raise ConfigErrors(errors)
    return files
