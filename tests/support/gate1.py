"""``kvgate gate G1`` on this machine against one storage target, with the demo profile's emulator
and a quick fio (4 MiB files, 1 s rounds, at most 5): what the storage-target tests need to show
what G1 does with a target, end to end, in about 15 s."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def run_g1(tmp_path: Path, storage: dict[str, Any], *, campaign: str = "t") -> subprocess.CompletedProcess[str]:
    """G1 with ``storage`` (an inventory storage entry) as the candidate's tier; reports under
    ``tmp_path/r/<campaign>``."""
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump({"cluster": "t", "nodes": [{
        "name": "local", "host": "localhost", "connection": "local", "platform": "cpu",
        "roles": ["server", "client", "storage"], "storage": [storage]}]}))
    prof = yaml.safe_load((ROOT / "profiles" / "demo.yaml").read_text())
    prof["arms"][1]["storage"] = storage["name"]
    # rounds of 1 s: beside a loaded CI run a 300 ms round's status dump came before fio's first read
    # on a /dev/shm tier had completed (0 bytes, which kvgate refuses as no figure: fio_read NOT_RUN)
    prof["probes"]["fio"].update({"size": "4 MiB", "runtime": "1s", "max_rounds": 5})
    prof_path = tmp_path / "prof.yaml"
    prof_path.write_text(yaml.safe_dump(prof))
    return subprocess.run([sys.executable, "-m", "harness.cli.main", "gate", "G1", "--inventory", str(inv),  # noqa: S603
                           "--profile", str(prof_path), "--campaign", campaign, "--reports", str(tmp_path / "r"),
                           "--no-progress"], capture_output=True, text=True, timeout=300, cwd=ROOT)
