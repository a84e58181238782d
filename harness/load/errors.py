"""Errors of the load generator.

They subclass the kvgate tree (``harness.errors`` is stdlib-only and bundled in the node agent),
so the CLI maps them to exit codes like every other kvgate error::

    LoadInputError (InputError)     a bad workload parameter, trace line, config value or file
    LoadRunError (InfraError)       the run could not proceed (endpoint unreachable for every request)

A failed *request* is never an exception: it is a record with ``status: "error"`` and an
``error_kind`` (see ``harness.load.client``).
"""

from __future__ import annotations

from harness.errors import InfraError, InputError


class LoadInputError(InputError):
    """A workload parameter, trace line, CLI value or result file is wrong."""


class LoadRunError(InfraError):
    """The load run could not proceed at all."""
