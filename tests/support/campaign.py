"""One real, passed G1+G2 campaign on this machine, run once per test session and copied per test.

Every G3 end-to-end test needs a valid G2 baseline first; running G1 and G2 again for each of them
cost a minute per test. ``PassedBaseline.run`` runs the real gates once (the KV emulator, real fio,
the small profile of ``tests/pipelines/conftest.py``); ``copy_into`` gives a test its own copy of
the campaign under its own reports directory, so no test sees another's writes (a test may
tamper with, resume or extend its copy). The copy is byte for byte: its manifest and signatures
verify as the original's, and the recorded workload fingerprint holds no path or port, so a test's
own inventory (its own tier and work directories) and its own engine port compare equal to it.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from harness.cli.main import run
from harness.ports import free_port
from harness.store.campaign import Campaign
from harness.store.journal import JOURNAL
from tests.pipelines.conftest import small_profile
from tests.support.once import build_once

__all__ = ["PassedBaseline"]


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class PassedBaseline:
    """A campaign whose G1 and G2 passed with ``small_profile`` on a local inventory."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root
        self.name = name
        self.reports = root / "reports"
        self.profile_data = small_profile(free_port())

    @classmethod
    def run(cls, root: Path, name: str = "base") -> PassedBaseline:
        b = cls(root, name)
        tier = root / "tier"
        tier.mkdir(parents=True)
        inv = _write(root / "inventory.yaml", {
            "cluster": "shared-baseline", "defaults": {"workdir": str(root / "work")},
            "nodes": [{"name": "local", "host": "localhost", "connection": "local", "roles": ["server", "client"],
                       "storage": [{"name": "tier", "path": str(tier)}]}]})
        prof = _write(root / "profile.yaml", b.profile_data)
        for gate in ("G1", "G2"):
            code = run(["gate", gate, "--inventory", str(inv), "--profile", str(prof), "--campaign", name,
                        "--reports", str(b.reports), "--no-progress"])
            res = json.loads((b.reports / name / gate / "result.json").read_text())
            assert code == 0 and res["verdict"] == "PASS", (gate, res["verdict"], res.get("verdict_reason"))
        return b

    @classmethod
    def shared(cls, root: Path, name: str = "base") -> PassedBaseline:
        """The baseline under ``root``, run there once per session (``tests.support.once``): by the
        first xdist worker to ask while the others wait, then read back by every later one."""
        def build(r: Path) -> None:
            cls.run(r, name)

        build_once(root, build)
        b = cls(root, name)
        b.profile_data = yaml.safe_load((root / "profile.yaml").read_text())
        return b

    def profile(self, port: int | None = None) -> dict[str, Any]:
        """A fresh copy of the profile the baseline ran with (on ``port``, or a free one)."""
        data = copy.deepcopy(self.profile_data)
        data["engine"]["port"] = port if port is not None else free_port()
        return data

    def result(self, gate: str) -> dict[str, Any]:
        return dict(json.loads((self.reports / self.name / gate / "result.json").read_text()))

    def copy_into(self, reports: Path, campaign: str | None = None, *, whole: bool = False,
                  gates: tuple[str, ...] = ("G1", "G2"), started_with: tuple[Path, Path] | None = None) -> Path:
        """Copy the campaign into ``reports/<campaign>`` (default: the same name) and return it.

        ``whole=False``: the ``gates`` directories only (G1 alone for a G2 test), for a test that
        goes on in that campaign with its own inventory and profile (a campaign.json records the
        files a campaign was started with and refuses others, so the test's next gate starts it; a
        G3 or G4 refuses gates copied in so, as they are of another campaign: see ``started_with``).
        ``started_with=(inventory, profile)``: the gates, the journal, and a campaign.json of the same
        campaign id recording the test's own files, as if the campaign had been started with them
        (equal to the shared ones in every fingerprinted field): G3 then stands on them.
        ``whole=True``: the campaign as it is, campaign.json included, for ``--baseline <campaign>``."""
        dest = reports / (campaign or self.name)
        src = self.reports / self.name
        if whole:
            shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(".lock"))
            return dest
        dest.mkdir(parents=True, exist_ok=True)
        for gate in gates:
            shutil.copytree(src / gate, dest / gate, symlinks=True)
        if started_with is not None:
            self._restart(dest, *started_with)
        return dest

    def _restart(self, dest: Path, inventory: Path, profile: Path) -> None:
        Campaign.open(dest.parent, dest.name, inventory_path=inventory, profile_path=profile, create=True).close()
        meta = json.loads((dest / "campaign.json").read_text())
        meta["id"] = Campaign.read(self.reports, self.name).id
        (dest / "campaign.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        shutil.copyfile(self.reports / self.name / JOURNAL, dest / JOURNAL)
