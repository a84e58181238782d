"""``kvgate init --platform P HOST...``: write a starting inventory and profile into a new directory,
validated on the spot, with comments saying what to fill in and a model that fits the platform's
accelerators."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Optional

from harness.config.loader import parse_model
from harness.config.profile import GEOMETRY_PRESETS, Profile
from harness.config.starter import INVENTORY_FILE, PROFILE_FILE, profile_text, starter_files
from harness.config.yamlsource import parse_yaml
from harness.errors import InputError
from harness.estimate.fit import accelerator_of, fitting_preset
from harness.exitcodes import ExitCode
from harness.platforms import PLATFORMS, get_platform
from harness.units import UnitKind, parse_quantity

DEFAULT_NAME = "lab"
CLUSTERS = "clusters"  # under the current directory; ignored by git in a clone (.gitignore)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "init",
        help="write a starting inventory and profile for a platform",
        description="Write inventory.yaml and profile.yaml for the given node hosts into a new directory: "
        "the platform's accelerators, device variables and expected software filled in, a model that fits "
        "those accelerators, TODO comments (and placeholders `kvgate validate` names) where only you know "
        "the answer (SSH key, storage paths, model). Both files are validated before they are written; "
        "existing files are never overwritten.",
    )
    p.add_argument("--platform", required=True, choices=list(PLATFORMS),
                   help="accelerator platform of the nodes")
    p.add_argument("hosts", nargs="+", metavar="HOST", help="node addresses or DNS names")
    p.add_argument("--name", help=f"cluster and profile name (default: {DEFAULT_NAME}, or {DEFAULT_NAME}-2, -3 ... "
                   "when that directory exists)")
    p.add_argument("--dir", type=Path, metavar="DIR",
                   help=f"the new directory to write into (default: ./{CLUSTERS}/NAME)")
    p.add_argument("--model", choices=list(GEOMETRY_PRESETS), metavar="PRESET",
                   help="the model preset (default: the largest that fits the platform's accelerators at every "
                   f"concurrency; known: {', '.join(GEOMETRY_PRESETS)})")
    p.set_defaults(func=run)


def _target(args: argparse.Namespace) -> tuple[str, Path]:
    """The name and directory: a default name taken by an earlier init moves on to the next free one."""
    if args.name is not None or args.dir is not None:
        name = args.name or DEFAULT_NAME
        return name, args.dir if args.dir is not None else Path(CLUSTERS) / name
    for n in range(1, 1000):
        name = DEFAULT_NAME if n == 1 else f"{DEFAULT_NAME}-{n}"
        if not os.path.lexists(Path(CLUSTERS) / name):
            return name, Path(CLUSTERS) / name
    raise InputError(f"kvgate init: {CLUSTERS}/{DEFAULT_NAME} .. {DEFAULT_NAME}-999 all exist: give --name")


def choose_preset(platform: str, name: str, asked: Optional[str]) -> str:
    """``asked``, else the largest preset that fits the platform's default accelerators at every
    concurrency of the starting load (a CPU node has none to fit: a small model)."""
    if asked is not None:
        return asked
    d = get_platform(platform).defaults
    if not d.accelerator_model or d.accelerator_count == 0:
        return "llama-3-8b"
    memory = parse_quantity(d.accelerator_memory, UnitKind.BYTES).value if d.accelerator_memory else None
    acc = accelerator_of(d.accelerator_model, memory)
    text = profile_text(platform, name)
    profile = parse_model(parse_yaml(text, PROFILE_FILE), Profile)
    preset = fitting_preset(profile, acc)
    if preset is None:
        raise InputError(f"kvgate init: no model preset fits {d.accelerator_count} x {d.accelerator_memory} "
                         f"{d.accelerator_model} at concurrency {profile.load.concurrency}: give --model PRESET "
                         f"({', '.join(GEOMETRY_PRESETS)}) and check it with `kvgate estimate`")
    return preset


def run(args: argparse.Namespace) -> int:
    name, directory = _target(args)
    preset = choose_preset(args.platform, name, args.model)
    files = starter_files(args.platform, args.hosts, name, preset)  # validated before anything is written
    targets = {directory / rel: text for rel, text in files.items()}
    existing = [str(p) for p in targets if os.path.lexists(p)]  # a dangling link exists too
    if existing:
        raise InputError(f"kvgate init: {', '.join(existing)} already exist(s); nothing was written "
                         "(choose another --name or --dir, or remove them)")
    for path, text in targets.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # never over a file (or a link) that appeared, never through a link
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except OSError as exc:
            raise InputError(f"kvgate init: cannot create {path}: {exc.strerror or exc}") from None
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        print(f"wrote {path}")
    inv, prof = directory / INVENTORY_FILE, directory / PROFILE_FILE
    why = ("as asked" if args.model else "no accelerators to fit: a small model" if get_platform(args.platform)
           .defaults.accelerator_count == 0 else f"the largest that fits {args.platform}'s declared accelerators")
    print(f"model: preset {preset} ({why}; `kvgate estimate` shows the sums, `kvgate validate` checks the fit)")
    print(f"next: fill in the TODOs, then `kvgate validate {inv} {prof}`, `kvgate plan --inventory {inv} "
          f"--profile {prof}` and `kvgate ping --inventory {inv}`")
    return int(ExitCode.OK)
