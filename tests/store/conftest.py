"""History store fixtures: a session-wide throwaway PostgreSQL server (tests/support/postgres.py)
and ``history_url``, parametrised over both backends so each contract test runs on each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.postgres import PostgresServer


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer.start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def history_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.sqlite'}"
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.create_database()
