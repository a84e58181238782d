"""The results history: every run (nightly, or a G2/G3/G4 gate imported from a campaign) with its
metrics, in one relational database shared by a team or kept in one file.

Rules a reader must keep:

* One schema for both backends, written with SQLAlchemy Core: SQLite by default
  (``reports/history.sqlite``), PostgreSQL for teams (``postgresql://...``, driver psycopg 3).
  ``history_url()`` chooses: the ``--history`` argument, else ``KVGATE_HISTORY_URL``, else the file.
* Migrations are a list of numbered steps applied in order at open time and recorded in the
  ``kvgate_schema`` table, under a lock (PostgreSQL advisory lock, SQLite ``BEGIN IMMEDIATE``) so
  two processes opening a new database at once migrate it once. A database newer than this
  kvgate is refused, never written. (Not Alembic: the schema ships inside the package and is
  migrated from the CLI and tests alike; a script directory, ``env.py`` and an ini file would be
  more moving parts than the few steps we have. Each step is plain SQLAlchemy Core DDL.)
* A run is written in one transaction (the run row and all its metrics) or not at all. Its
  ``run_key`` is unique: writing the same run twice (``history import`` again, a retried CI job)
  keeps the first copy and says so, so imports are idempotent and concurrent writers lose
  nothing and duplicate nothing. SQLite waits for the write lock (busy timeout) instead of failing.
* Runs are ordered by ``started_at`` (UTC ISO-8601 text, which sorts as time), then ``id``.
* Passwords in URLs are never printed: :func:`safe_url` masks them.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, SQLAlchemyError

from harness.errors import InfraError, InputError
from harness.redact import is_secret_name, scrub_text

__all__ = [
    "SCHEMA_VERSION", "HistoryDB", "HistoryError", "MetricRecord", "RunRecord", "SeriesTable", "StoredRun",
    "argv_password_warning", "history_url", "open_history", "safe_url",
]

SCHEMA_VERSION = 1
ENV_URL = "KVGATE_HISTORY_URL"
DEFAULT_FILE = "history.sqlite"
# A fixed key for PostgreSQL's advisory lock taken while migrating ("kvgate" in ASCII).
_PG_LOCK_KEY = 0x6B7667617465


class HistoryError(InfraError):
    """The history database could not be reached or written (exit 4)."""


@dataclass
class MetricRecord:
    """One metric of one run: the summary of its samples (base units) and the samples themselves."""

    name: str
    median: Optional[float]
    unit: str = ""
    better: str = "higher"  # "higher" or "lower"
    n: int = 0
    low: Optional[float] = None
    high: Optional[float] = None
    samples: list[float] = field(default_factory=list)


@dataclass
class RunRecord:
    """What is stored per run. ``series`` is the workload fingerprint digest: only runs of one
    series are ever compared."""

    run_key: str
    series: str
    kind: str  # "nightly", "G2", "G3", "G4"
    started_at: str
    campaign: str = ""
    finished_at: str = ""
    profile: str = ""
    kvgate_version: str = ""
    git_commit: Optional[str] = None
    verdict: str = ""
    exit_code: Optional[int] = None
    emulated: bool = False
    nodes: list[str] = field(default_factory=list)
    versions: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> software -> version
    fingerprint: dict[str, Any] = field(default_factory=dict)
    source: str = ""  # where it came from (result.json path), for people
    metrics: list[MetricRecord] = field(default_factory=list)


@dataclass
class StoredRun(RunRecord):
    id: int = 0


@dataclass
class SeriesTable:
    """One series read in bulk: its runs (oldest first, without their metrics) and, per metric
    name (``names``, sorted), its median / low / high in every run as rows of float arrays of shape
    ``(len(names), len(runs))``, NaN where a run lacks the metric or its value."""

    runs: list[StoredRun]
    names: list[str]
    better: dict[str, str]
    unit: dict[str, str]
    median: Any  # numpy.ndarray
    low: Any
    high: Any

    def row(self, name: str) -> int:
        return self.names.index(name)


metadata = sa.MetaData()

schema_table = sa.Table(
    "kvgate_schema", metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", sa.String(40), nullable=False),
)

runs_table = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_key", sa.String(128), nullable=False, unique=True),
    sa.Column("series", sa.String(64), nullable=False, index=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("campaign", sa.String(255), nullable=False, default=""),
    sa.Column("started_at", sa.String(40), nullable=False, index=True),
    sa.Column("finished_at", sa.String(40), nullable=False, default=""),
    sa.Column("profile", sa.String(255), nullable=False, default=""),
    sa.Column("kvgate_version", sa.String(64), nullable=False, default=""),
    sa.Column("git_commit", sa.String(64), nullable=True),
    sa.Column("verdict", sa.String(32), nullable=False, default=""),
    sa.Column("exit_code", sa.Integer, nullable=True),
    sa.Column("emulated", sa.Boolean, nullable=False, default=False),
    sa.Column("nodes", sa.Text, nullable=False, default="[]"),  # JSON list
    sa.Column("versions", sa.Text, nullable=False, default="{}"),  # JSON object
    sa.Column("fingerprint", sa.Text, nullable=False, default="{}"),  # JSON object
    sa.Column("source", sa.Text, nullable=False, default=""),
    sa.Index("ix_runs_series_started", "series", "started_at"),
)

metrics_table = sa.Table(
    "metrics", metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("unit", sa.String(32), nullable=False, default=""),
    sa.Column("better", sa.String(8), nullable=False, default="higher"),
    sa.Column("n", sa.Integer, nullable=False, default=0),
    sa.Column("median", sa.Float, nullable=True),
    sa.Column("low", sa.Float, nullable=True),
    sa.Column("high", sa.Float, nullable=True),
    sa.Column("samples", sa.Text, nullable=False, default="[]"),  # JSON list of floats
)


def _migration_1(conn: Connection) -> None:
    """The first schema: runs and their metrics."""
    # Version 1 is the tables as first defined above. A later step must not rely on these
    # definitions (they will then describe the newest schema): it states its own DDL.
    runs_table.create(conn, checkfirst=True)
    metrics_table.create(conn, checkfirst=True)


# (version, step). A new step appends here; steps already shipped are never edited.
MIGRATIONS: tuple[tuple[int, Any], ...] = ((1, _migration_1),)


def safe_url(url: str) -> str:
    """``url`` with its password masked, for messages: the userinfo password and every secret query
    parameter (``?password=``, ``sslpassword=``)."""
    try:
        return scrub_text(sa.engine.make_url(url).render_as_string(hide_password=True))
    except ArgumentError:
        return "<unparseable history URL>"


def argv_password_warning(explicit: Optional[str]) -> Optional[str]:
    """A warning when a password was given in a ``--history`` argument (visible in ``ps``): in the
    URL's userinfo or in a secret query parameter (``?password=``, ``sslpassword=``)."""
    if not explicit or "://" not in explicit:
        return None
    try:
        parsed = sa.engine.make_url(explicit)
    except ArgumentError:
        return None
    has = parsed.password is not None or any(is_secret_name(k) for k in parsed.query)
    return ("warning: the --history URL carries a password, which other users can read in `ps`; give it "
            "through PGPASSWORD or ~/.pgpass instead") if has else None


def history_url(explicit: Optional[str], reports_root: Path) -> str:
    """The database URL: ``explicit`` (a URL or a file path), else ``$KVGATE_HISTORY_URL``, else
    ``<reports_root>/history.sqlite``."""
    value = explicit or os.environ.get(ENV_URL) or ""
    if not value:
        return f"sqlite:///{(Path(reports_root) / DEFAULT_FILE).resolve()}"
    if "://" not in value:  # a plain file path means SQLite
        return f"sqlite:///{Path(value).resolve()}"
    return value


def _engine_for(url: str) -> Engine:
    try:
        parsed = sa.engine.make_url(url)
    except ArgumentError:
        raise InputError(f"history URL {safe_url(url)!r} is not a database URL "
                         "(expected sqlite:///FILE or postgresql://USER@HOST/DB)") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        # Autocommit at the driver level; SQLAlchemy's begin() then emits BEGIN IMMEDIATE, so a
        # writer takes the lock up front and waits up to 60 s for another one (no lost update).
        engine = sa.create_engine(parsed, connect_args={"timeout": 60, "isolation_level": None})

        @sa.event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA busy_timeout=60000")
            _wal(cur)
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @sa.event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    if backend == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        return sa.create_engine(parsed, pool_pre_ping=True)
    raise InputError(f"history URL {safe_url(url)!r}: backend {backend!r} is not supported "
                     "(known: sqlite, postgresql)")


def _wal(cur: sqlite3.Cursor, wait_s: float = 60.0) -> None:
    """Switch the file to WAL. SQLite answers "database is locked" at once, without its busy
    handler, when several connections switch a new file at the same moment (8 processes racing on
    a fresh file under load: 20 of 3,600 opens failed so); retried within the busy timeout, none did."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


class HistoryDB:
    """An open history database (see the module docstring)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = _engine_for(url)
        self.backend = self.engine.dialect.name
        try:
            self._migrate()
        except OperationalError as exc:
            self.engine.dispose()
            reason = scrub_text(str(exc.orig))
            raise HistoryError(f"cannot open the history database {safe_url(url)}: {reason}") from None
        except BaseException:
            self.engine.dispose()
            raise

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> HistoryDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self, what: str) -> Iterator[Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except IntegrityError:
            raise
        except SQLAlchemyError as exc:
            detail = scrub_text(str(getattr(exc, "orig", None) or exc))
            raise HistoryError(f"history database {safe_url(self.url)}: {what} failed: {detail}") from None

    # Schema ----------------------------------------------------------------------------------
    def _migrate(self) -> None:
        with self.engine.begin() as conn:
            if self.backend == "postgresql":
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
            schema_table.create(conn, checkfirst=True)
            current = conn.execute(sa.select(sa.func.max(schema_table.c.version))).scalar() or 0
            if current > SCHEMA_VERSION:
                raise InputError(f"history database {safe_url(self.url)} has schema version {current}; this kvgate "
                                 f"knows up to {SCHEMA_VERSION} (upgrade kvgate)")
            for version, step in MIGRATIONS:
                if version > current:
                    step(conn)
                    conn.execute(schema_table.insert().values(version=version, applied_at=_now()))

    def schema_version(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.max(schema_table.c.version))).scalar() or 0)

    # Writing ---------------------------------------------------------------------------------
    def add_run(self, run: RunRecord) -> tuple[int, bool]:
        """Store ``run`` with its metrics in one transaction; returns ``(id, created)``. A run whose
        ``run_key`` is already stored is left as it is (``created`` False)."""
        existing = self._id_of(run.run_key)
        if existing is not None:
            return existing, False
        row = _run_row(run)
        try:
            with self._tx("writing a run") as conn:
                pk = conn.execute(runs_table.insert().values(**row)).inserted_primary_key
                assert pk is not None  # an INSERT of one row always has its key
                run_id = int(pk[0])
                if run.metrics:
                    conn.execute(metrics_table.insert(), [_metric_row(run_id, m) for m in run.metrics])
        except IntegrityError:
            # Another writer stored the same run between our look-up and our insert.
            found = self._id_of(run.run_key)
            if found is None:
                raise
            return found, False
        return run_id, True

    def add_runs(self, runs: Sequence[RunRecord]) -> int:
        """Store many runs in one transaction (bulk import, benchmarks); runs already stored are
        skipped. Returns how many were added."""
        with self.engine.connect() as conn:
            keys = [r.run_key for r in runs]
            have: set[str] = set()
            for start in range(0, len(keys), 500):
                q = sa.select(runs_table.c.run_key).where(runs_table.c.run_key.in_(keys[start:start + 500]))
                have.update(str(k) for k in conn.execute(q).scalars())
        todo = [r for r in runs if r.run_key not in have]
        if not todo:
            return 0
        with self._tx("writing runs") as conn:
            # bulk: the run rows in one statement, their ids read back by run key, then every metric
            # row in one statement (one round trip per run would dominate a 10,000-run import)
            conn.execute(runs_table.insert(), [_run_row(r) for r in todo])
            ids: dict[str, int] = {}
            for start in range(0, len(todo), 500):
                keys = [r.run_key for r in todo[start:start + 500]]
                q = sa.select(runs_table.c.run_key, runs_table.c.id).where(runs_table.c.run_key.in_(keys))
                ids.update({str(k): int(i) for k, i in conn.execute(q)})
            rows = [_metric_row(ids[r.run_key], m) for r in todo for m in r.metrics]
            if rows:
                conn.execute(metrics_table.insert(), rows)
        return len(todo)

    def _id_of(self, run_key: str) -> Optional[int]:
        with self.engine.connect() as conn:
            v = conn.execute(sa.select(runs_table.c.id).where(runs_table.c.run_key == run_key)).scalar()
        return None if v is None else int(v)

    # Reading ---------------------------------------------------------------------------------
    def runs(self, *, series: Optional[str] = None, kind: Optional[str] = None, limit: Optional[int] = None,
             with_metrics: bool = False) -> list[StoredRun]:
        """Runs oldest first (the last ``limit`` ones when given)."""
        q = sa.select(runs_table)
        if series:
            q = q.where(runs_table.c.series == series)
        if kind:
            q = q.where(runs_table.c.kind == kind)
        q = q.order_by(runs_table.c.started_at.desc(), runs_table.c.id.desc())
        if limit:
            q = q.limit(limit)
        with self.engine.connect() as conn:
            rows = list(conn.execute(q).mappings())
            out = [_stored(r) for r in reversed(rows)]
            if with_metrics and out:
                self._attach_metrics(conn, out)
        return out

    def run(self, ref: str) -> StoredRun:
        """One run by id (``12``) or run key; InputError listing how to find runs when unknown."""
        q = sa.select(runs_table)
        q = q.where(runs_table.c.id == int(ref)) if ref.isdigit() else q.where(runs_table.c.run_key == ref)
        with self.engine.connect() as conn:
            row = conn.execute(q).mappings().first()
            if row is None:
                raise InputError(f"no run {ref!r} in the history {safe_url(self.url)} (see `kvgate history list`)")
            out = _stored(row)
            self._attach_metrics(conn, [out])
        return out

    def _attach_metrics(self, conn: Connection, runs: Sequence[StoredRun], *, samples: bool = True) -> None:
        by_id = {r.id: r for r in runs}
        ids = list(by_id)
        t = metrics_table.c
        cols = [t.run_id, t.name, t.unit, t.better, t.n, t.median, t.low, t.high] + ([t.samples] if samples else [])
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            q = sa.select(*cols).where(t.run_id.in_(chunk)).order_by(t.run_id, t.name)
            # plain tuples: this is the hot path of change detection over long series
            for row in conn.execute(q).all():
                xs = [float(x) for x in json.loads(row[8])] if samples and row[8] else []
                by_id[int(row[0])].metrics.append(MetricRecord(
                    name=row[1], unit=row[2], better=row[3], n=int(row[4]), median=row[5], low=row[6], high=row[7],
                    samples=xs))

    def series_ids(self) -> list[str]:
        with self.engine.connect() as conn:
            return [str(s) for s in conn.execute(sa.select(runs_table.c.series).distinct()).scalars()]

    def metric_series(self, series: str, *, limit: Optional[int] = None, samples_for_last: Optional[int] = None
                      ) -> tuple[list[StoredRun], dict[str, list[Optional[MetricRecord]]]]:
        """The runs of one series (oldest first, the last ``limit``) and, per metric name, its record
        in each of those runs (None where a run lacks it). With ``samples_for_last``, only the last
        that many runs carry their samples (the others their summary only: faster for long series)."""
        runs = self.runs(series=series, limit=limit)
        if runs:
            cut = len(runs) if samples_for_last is None else max(0, len(runs) - samples_for_last)
            with self.engine.connect() as conn:
                if cut:
                    self._attach_metrics(conn, runs[:cut], samples=samples_for_last is None)
                if cut < len(runs):
                    self._attach_metrics(conn, runs[cut:])
        names = sorted({m.name for r in runs for m in r.metrics})
        table: dict[str, list[Optional[MetricRecord]]] = {n: [None] * len(runs) for n in names}
        for i, r in enumerate(runs):
            for m in r.metrics:
                table[m.name][i] = m
        return runs, table

    def series_table(self, series: str, *, limit: Optional[int] = None, bounds: bool = True) -> SeriesTable:
        """The last ``limit`` runs of one series (all when None) with every metric's median (and, with
        ``bounds``, low and high; else those arrays are all NaN), in three queries (the runs, each
        metric's direction and unit, then every metric value of those runs at once as plain tuples):
        the read behind change detection and the trend page, with no object per metric row."""
        runs = self.runs(series=series, limit=limit)
        pos = {r.id: i for i, r in enumerate(runs)}
        t, r = metrics_table.c, runs_table.c
        of_series = sa.select(r.id).where(r.series == series)
        if limit and runs:
            of_series = of_series.where(sa.or_(r.started_at > runs[0].started_at,
                                               sa.and_(r.started_at == runs[0].started_at, r.id >= runs[0].id)))
        ids = of_series.scalar_subquery()
        cols = [t.run_id, t.name, t.median] + ([t.low, t.high] if bounds else [])
        with self.engine.connect() as conn:
            # the driver's own cursor: SQLAlchemy's row objects cost more than the query for 500k rows
            rows: list[Any] = []
            if runs:
                sql, params = _compiled(conn, sa.select(*cols).where(t.run_id.in_(ids)))
                cur = conn.connection.cursor()
                try:
                    cur.execute(sql, params)
                    rows = list(cur.fetchall())
                finally:
                    cur.close()
            names = sorted({row[1] for row in rows})
            # direction and unit: from the latest run, and for a name it lacks, from one run that has it
            kind = sa.select(t.name, t.better, t.unit)
            kinds = {str(k[0]): k for k in conn.execute(kind.where(t.run_id == runs[-1].id))} if runs else {}
            for name in names:
                if name not in kinds:
                    kinds[name] = conn.execute(kind.where(t.name == name, t.run_id.in_(ids)).limit(1)).one()
        better = {n: str(kinds[n][1]) for n in names}
        unit = {n: str(kinds[n][2]) for n in names}
        col = {n: k for k, n in enumerate(names)}
        shape = (len(names), len(runs))
        arrays = [np.full(shape, np.nan) for _ in range(3)]
        if rows:
            ri = np.array([col[row[1]] for row in rows], dtype=np.int64)
            ci = np.array([pos.get(row[0], -1) for row in rows], dtype=np.int64)
            keep = ci >= 0
            for k in range(3 if bounds else 1):
                vals = np.array([row[2 + k] for row in rows], dtype=np.float64)  # None -> nan
                arrays[k][ri[keep], ci[keep]] = vals[keep]
        return SeriesTable(runs, names, better, unit, *arrays)

    def attach_metrics(self, runs: Sequence[StoredRun]) -> None:
        """Read the metrics (with their samples) of ``runs`` into them (in place)."""
        with self.engine.connect() as conn:
            self._attach_metrics(conn, runs)

    def count(self) -> tuple[int, int]:
        """(runs, metric rows)."""
        with self.engine.connect() as conn:
            n_runs = conn.execute(sa.select(sa.func.count()).select_from(runs_table)).scalar() or 0
            n_metrics = conn.execute(sa.select(sa.func.count()).select_from(metrics_table)).scalar() or 0
        return int(n_runs), int(n_metrics)


def _compiled(conn: Connection, query: Any) -> tuple[str, Any]:
    """``query`` as the driver's SQL text and parameters (for ``exec_driver_sql``)."""
    c = query.compile(dialect=conn.dialect)
    params = c.construct_params()
    if conn.dialect.paramstyle in ("qmark", "numeric", "format"):
        return str(c), tuple(params[k] for k in c.positiontup or ())
    return str(c), params


def open_history(explicit: Optional[str], reports_root: Path) -> HistoryDB:
    return HistoryDB(history_url(explicit, reports_root))


def _now() -> str:
    import datetime as _dt

    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _run_row(run: RunRecord) -> dict[str, Any]:
    return {
        "run_key": run.run_key, "series": run.series, "kind": run.kind, "campaign": run.campaign,
        "started_at": run.started_at, "finished_at": run.finished_at, "profile": run.profile,
        "kvgate_version": run.kvgate_version, "git_commit": run.git_commit, "verdict": run.verdict,
        "exit_code": run.exit_code, "emulated": run.emulated, "nodes": json.dumps(run.nodes),
        "versions": json.dumps(run.versions, sort_keys=True),
        "fingerprint": json.dumps(run.fingerprint, sort_keys=True), "source": run.source,
    }


def _metric_row(run_id: int, m: MetricRecord) -> dict[str, Any]:
    return {"run_id": run_id, "name": m.name, "unit": m.unit, "better": m.better, "n": m.n, "median": m.median,
            "low": m.low, "high": m.high, "samples": json.dumps([float(x) for x in m.samples])}


def _stored(r: Any) -> StoredRun:
    return StoredRun(
        id=int(r["id"]), run_key=r["run_key"], series=r["series"], kind=r["kind"], campaign=r["campaign"],
        started_at=r["started_at"], finished_at=r["finished_at"], profile=r["profile"],
        kvgate_version=r["kvgate_version"], git_commit=r["git_commit"], verdict=r["verdict"],
        exit_code=r["exit_code"], emulated=bool(r["emulated"]), nodes=list(json.loads(r["nodes"] or "[]")),
        versions=dict(json.loads(r["versions"] or "{}")), fingerprint=dict(json.loads(r["fingerprint"] or "{}")),
        source=r["source"], metrics=[],
    )
