"""One contract for the history store, run against SQLite and a real PostgreSQL server."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
import sqlalchemy as sa

from harness.errors import InputError
from harness.store.historydb import (
    SCHEMA_VERSION,
    HistoryDB,
    MetricRecord,
    RunRecord,
    _wal,
    history_url,
    safe_url,
    schema_table,
)


def _run(i: int, series: str = "s1", **kw: object) -> RunRecord:
    metrics = [MetricRecord(name=f"m{k}", median=100.0 + i + k, unit="ms", better="lower", n=3,
                            low=99.0 + i, high=101.0 + i, samples=[99.0 + i, 100.0 + i, 101.0 + i])
               for k in range(3)]
    base = dict(run_key=f"camp-{i}/nightly/2026-01-{i + 1:02d}T00:00:00Z", series=series, kind="nightly",
                started_at=f"2026-01-{i + 1:02d}T00:00:00Z", campaign=f"camp-{i}", git_commit=f"c{i}",
                nodes=["n1"], versions={"n1": {"engine": "1.0"}}, fingerprint={"load": {"c": 2}}, metrics=metrics)
    base.update(kw)
    return RunRecord(**base)  # type: ignore[arg-type]


def test_round_trip_and_order(history_url: str) -> None:
    with HistoryDB(history_url) as db:
        assert db.schema_version() == SCHEMA_VERSION
        for i in (2, 0, 1):
            run_id, created = db.add_run(_run(i))
            assert created and run_id > 0
        runs = db.runs(series="s1", with_metrics=True)
        assert [r.campaign for r in runs] == ["camp-0", "camp-1", "camp-2"]  # by started_at, not insert order
        r = db.run(str(runs[1].id))
        assert r.git_commit == "c1" and r.nodes == ["n1"] and r.versions == {"n1": {"engine": "1.0"}}
        assert [m.name for m in r.metrics] == ["m0", "m1", "m2"]
        assert r.metrics[0].samples == [100.0, 101.0, 102.0] and r.metrics[0].better == "lower"
        assert db.runs(series="s1", limit=2)[0].campaign == "camp-1"
        assert db.series_ids() == ["s1"]
        _runs, table = db.metric_series("s1")
        assert [m.median if m else None for m in table["m1"]] == [101.0, 102.0, 103.0]


def test_series_table_bulk_read(history_url: str) -> None:
    """The bulk read behind change detection and the trend page: medians, bounds, direction and
    unit per metric, NaN where a run lacks a metric, other series left out, ``limit`` = last runs."""
    import math

    with HistoryDB(history_url) as db:
        db.add_runs([_run(i) for i in (3, 0, 2, 1)] + [_run(4, series="s2")])
        short = _run(5, metrics=[MetricRecord(name="m0", median=None, better="lower", unit="ms"),
                                 MetricRecord(name="m9", median=7.0, better="higher", unit="B/s")])
        db.add_run(short)
        t = db.series_table("s1")
        assert [r.campaign for r in t.runs] == ["camp-0", "camp-1", "camp-2", "camp-3", "camp-5"]
        assert t.names == ["m0", "m1", "m2", "m9"]
        assert t.better == {"m0": "lower", "m1": "lower", "m2": "lower", "m9": "higher"}
        assert t.unit["m9"] == "B/s" and t.unit["m1"] == "ms"
        assert t.median[t.row("m1")].tolist()[:4] == [101.0, 102.0, 103.0, 104.0]
        assert math.isnan(t.median[t.row("m1"), 4]) and math.isnan(t.median[t.row("m0"), 4])  # absent; None
        assert t.median[t.row("m9")].tolist()[4] == 7.0 and math.isnan(t.median[t.row("m9"), 0])
        assert t.low[t.row("m0")].tolist()[:2] == [99.0, 100.0] and t.high[t.row("m0"), 3] == 104.0
        last = db.series_table("s1", limit=2, bounds=False)
        assert [r.campaign for r in last.runs] == ["camp-3", "camp-5"]
        assert last.median[last.row("m2"), 0] == 105.0 and math.isnan(last.low[0, 0])
        empty = db.series_table("nope")
        assert empty.runs == [] and empty.names == [] and empty.median.shape == (0, 0)


def test_same_run_twice_is_kept_once(history_url: str) -> None:
    with HistoryDB(history_url) as db:
        first, created = db.add_run(_run(0))
        again, created2 = db.add_run(_run(0, git_commit="other"))
        assert created and not created2 and again == first
        assert db.count() == (1, 3)
        assert db.run(str(first)).git_commit == "c0"


def test_unknown_run_is_an_input_error(history_url: str) -> None:
    with HistoryDB(history_url) as db:
        with pytest.raises(InputError, match="no run '42'"):
            db.run("42")


def test_reopen_does_not_migrate_again_and_newer_schema_is_refused(history_url: str) -> None:
    HistoryDB(history_url).close()
    with HistoryDB(history_url) as db:
        with db.engine.begin() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(schema_table)).scalar() == 1
            conn.execute(schema_table.insert().values(version=SCHEMA_VERSION + 1, applied_at="x"))
    with pytest.raises(InputError, match="schema version"):
        HistoryDB(history_url)


def _writer(url: str, worker: int, count: int) -> None:
    with HistoryDB(url) as db:
        for j in range(count):
            # every worker also writes the shared runs 0..4: each must land exactly once
            db.add_run(_run(j % 5, series="shared"))
            db.add_run(_run(100 + worker * count + j, series=f"w{worker}"))


def test_concurrent_writers_lose_and_duplicate_nothing(history_url: str) -> None:
    """Four processes open a NEW database at once (racing on the migration) and write."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(history_url, w, 15)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with HistoryDB(history_url) as db:
        assert db.schema_version() == SCHEMA_VERSION
        assert len(db.runs(series="shared")) == 5
        for w in range(4):
            runs = db.runs(series=f"w{w}", with_metrics=True)
            assert len(runs) == 15
            assert all(len(r.metrics) == 3 for r in runs)  # never a run without its metrics
        assert db.count() == (65, 195)


def test_url_choice_and_password_masking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KVGATE_HISTORY_URL", raising=False)
    assert history_url(None, tmp_path) == f"sqlite:///{tmp_path.resolve()}/history.sqlite"
    assert history_url(str(tmp_path / "h.db"), tmp_path) == f"sqlite:///{tmp_path.resolve()}/h.db"
    monkeypatch.setenv("KVGATE_HISTORY_URL", "postgresql://u:secret@db/h")
    assert history_url(None, tmp_path) == "postgresql://u:secret@db/h"
    assert "secret" not in safe_url("postgresql://u:secret@db/h")
    with pytest.raises(InputError, match="not supported"):
        HistoryDB("mysql://u@h/db")


def test_unreachable_postgres_is_an_infra_error_without_the_password() -> None:
    from harness.store.historydb import HistoryError

    with pytest.raises(HistoryError) as info:
        HistoryDB("postgresql://u:hunter2@127.0.0.1:1/none?connect_timeout=2")
    assert "hunter2" not in str(info.value)


def test_bulk_add_skips_stored_runs(history_url: str) -> None:
    with HistoryDB(history_url) as db:
        db.add_run(_run(1))
        assert db.add_runs([_run(0), _run(1), _run(2)]) == 2
        assert db.add_runs([_run(0), _run(1), _run(2)]) == 0
        assert db.count() == (3, 9)


def test_switching_to_wal_waits_for_a_writer_sqlite_does_not_wait_for(tmp_path: Path) -> None:
    """SQLite answers ``PRAGMA journal_mode=WAL`` with "database is locked" at once, without its
    busy handler, while another connection holds the write lock (as when several processes open a
    new file together: the race of the test above, which failed so under load). The switch is
    retried until the writer is done."""
    import sqlite3
    import threading
    import time

    path = str(tmp_path / "h.sqlite")
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE t(x)")
    writer.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, timeout=5, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        _wal(other.cursor(), wait_s=0.0)  # what SQLite does: no wait at all
    release = threading.Timer(0.3, lambda: writer.execute("COMMIT"))
    start = time.monotonic()
    release.start()
    try:
        _wal(other.cursor(), wait_s=10.0)
    finally:
        release.join()
    assert time.monotonic() - start >= 0.25
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    other.close()
    writer.close()
