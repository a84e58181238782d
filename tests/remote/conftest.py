"""Fixtures for the remote layer's tests: ``executor`` runs each contract test on every executor."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.remote.base import Executor
from harness.remote.local import LocalExecutor


@pytest.fixture(params=["local"])
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    ex: Executor = LocalExecutor("local")
    try:
        yield ex
    finally:
        ex.close()
