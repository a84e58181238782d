"""Two allowances, end to end on the emulator (issue 51 items 4 and 8): a candidate tier declared
``kind: memory`` (a directory under /dev/shm) and a G3 compared with a baseline of another input
length, accepted with ``--allow-baseline-mismatch load.input_len`` (the adversary's G3 at 1024 tokens
against a 4096-token baseline PASSed and verified plain VERIFIED). Each shows on page one of the
gate and the campaign report and as a LABEL line of ``kvgate verify``, and ``verify --strict``
exits 1 on it.

One G1 and one G3, with the session's passed G1+G2 (tests/support/campaign.py) as the baseline,
signed by both parties so no other label (unsigned baseline) is in play; the profile is the
baseline's without its G3 threshold overrides (each an allowance of its own). G1 carries the
memory-tier label alone; G3 carries both."""

from __future__ import annotations

import copy
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.ports import free_port
from tests.integrity.test_false_pass import gate_argv, kvgate, write
from tests.support.campaign import PassedBaseline
from tests.support.signing import cli, sign_both

pytestmark = [pytest.mark.fio, pytest.mark.slow]


@pytest.fixture
def ram_dir() -> Iterator[Path]:
    path = Path(f"/dev/shm/kvgate-labels-{uuid.uuid4().hex[:8]}")
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _page_one(html: str) -> str:
    """What comes before the headline of blockers: the notices and labels of page one."""
    return html.split('id="headline"')[0]


def test_memory_tier_and_baseline_mismatch_are_labels_end_to_end(
        tmp_path: Path, ram_dir: Path, passed_baseline: PassedBaseline, capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    base = passed_baseline.copy_into(reports, "base", whole=True)
    keys = tmp_path / "keys"
    keys.mkdir()
    allowed = sign_both(capsys, keys, base / "G2")  # a VERIFIED baseline: no unsigned-baseline label
    inv = write(tmp_path / "inventory.yaml", {
        "cluster": "ram", "defaults": {"workdir": str(tmp_path / "work")},
        "nodes": [{"name": "local", "host": "localhost", "connection": "local", "roles": ["server", "client"],
                   "storage": [{"name": "tier", "path": str(ram_dir), "kind": "memory"}]}]})
    data = copy.deepcopy(passed_baseline.profile(free_port()))
    data["overrides"] = []
    data["load"]["input_len"] = 1024  # the baseline ran 2048
    prof = write(tmp_path / "profile.yaml", data)
    memory = f"memory tier: local:tier ({ram_dir}) is declared kind: memory: its figures are RAM's"

    code, out = kvgate(capsys, *gate_argv("G1", inv, prof, reports, "ram"))
    assert code == 0, out  # measured (buffered), not refused
    g1 = reports / "ram" / "G1"
    assert memory.replace("'", "&#39;") in _page_one((g1 / "report.html").read_text())
    sign_both(capsys, keys, g1)
    code, out = cli(capsys, "verify", str(g1), "--allowed-signers", str(allowed))
    assert code == 0 and f"LABEL    {memory}" in out and "1 label(s)" in out, out
    code, out = cli(capsys, "verify", str(g1), "--allowed-signers", str(allowed), "--strict")
    assert code == 1 and "NOT VERIFIED (--strict): 1 label(s)" in out, out

    code, out = kvgate(capsys, *gate_argv("G3", inv, prof, reports, "ram", "--baseline", "base",
                                          "--allowed-signers", str(allowed),
                                          "--allow-baseline-mismatch", "load.input_len"))
    g3 = reports / "ram" / "G3"
    assert code in (0, 1, 3) and (g3 / "result.json").is_file(), out  # measured; the verdict is not the point
    mismatch = "baseline mismatch allowed: load.input_len was 2048 in the baseline and 1024 in this run"
    html = _page_one((g3 / "report.html").read_text())
    assert memory.replace("'", "&#39;") in html and "load.input_len" in html and "2048" in html, html
    assert cli(capsys, "report", str(reports / "ram"))[0] == 0
    campaign_page = _page_one((reports / "ram" / "report.html").read_text())
    assert f"G3: {memory}".replace("'", "&#39;") in campaign_page and "load.input_len" in campaign_page
    sign_both(capsys, keys, g3)
    code, out = cli(capsys, "verify", str(g3), "--allowed-signers", str(allowed))
    assert code == 0, out
    assert f"LABEL    {mismatch}" in out and f"LABEL    {memory}" in out and "2 label(s)" in out, out
    code, out = cli(capsys, "verify", str(g3), "--allowed-signers", str(allowed), "--strict")
    assert code == 1 and "NOT VERIFIED (--strict): 2 label(s)" in out, out
