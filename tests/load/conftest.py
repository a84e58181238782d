"""Fixtures for the load tests: a real scripted HTTP server on 127.0.0.1 per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.load.sse_server import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s
