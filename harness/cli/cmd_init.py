"""``kvgate init --platform mi308x|ascend910b|cuda HOST...``: write a starting inventory and profile,
validated on the spot, with comments saying what to fill in."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from harness.config.starter import starter_files
from harness.errors import InputError
from harness.exitcodes import ExitCode
from harness.platforms import PLATFORMS


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "init",
        help="write a starting inventory and profile for a platform",
        description="Write inventory/NAME.yaml and profiles/NAME.yaml for the given node hosts: the "
        "platform's accelerators, device variables and expected software filled in, TODO comments "
        "where only you know the answer (SSH key, storage paths, model). Both files are validated "
        "before they are written; existing files are never overwritten.",
    )
    p.add_argument("--platform", required=True, choices=list(PLATFORMS),
                   help="accelerator platform of the nodes")
    p.add_argument("hosts", nargs="+", metavar="HOST", help="node addresses or DNS names")
    p.add_argument("--name", default="lab", help="cluster and file name (default: lab)")
    p.add_argument("--dir", type=Path, default=Path("."), metavar="DIR",
                   help="where inventory/ and profiles/ are (default: the current directory)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    files = starter_files(args.platform, args.hosts, args.name)  # validated before anything is written
    targets = {args.dir / rel: text for rel, text in files.items()}
    existing = [str(p) for p in targets if os.path.lexists(p)]  # a dangling link exists too
    if existing:
        raise InputError(f"kvgate init: {', '.join(existing)} already exist(s); nothing was written "
                         "(choose another --name or remove them)")
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
    inv, prof = targets
    print(f"next: fill in the TODOs, then `kvgate validate {inv} {prof}` and "
          f"`kvgate facts --inventory {inv}`")
    return int(ExitCode.OK)
