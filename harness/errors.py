"""The kvgate exception tree.

Every error a user can cause or meet carries the context needed to act on it, and maps to an
exit code (``harness.exitcodes.ExitCode``)::

    KvgateError                      base; .exit_status (the process exit code)
    ├── InputError                   bad file or argument (exit 2)
    │   ├── ConfigError              a YAML file: .path, .line, .column, .field
    │   │   └── ConfigErrors         several ConfigError at once
    │   └── UnitError                a quantity string with an unknown or wrong unit
    ├── InfraError                   something outside kvgate failed (exit 4)
    │   ├── StorageFull              a local disk kvgate writes to is full (ENOSPC, EDQUOT)
    │   ├── (remote.errors.RemoteError and its subclasses: host, command, exit code, output tail)
    │   └── (facts.collect.FactsUnsettled: a node's batched facts never settle; node, pending commands)
    └── NotAvailableError            a part that is not built yet (exit 2, never a pass)
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.exitcodes import ExitCode


class KvgateError(Exception):
    """Base of every error kvgate raises on purpose.

    ``exit_status`` is the process exit code the CLI returns for it; it is not named
    ``exit_code`` because remote errors carry the failed command's exit code under that name."""

    exit_status: ExitCode = ExitCode.INTERNAL_ERROR

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InputError(KvgateError):
    """A user input (file, argument, value) is wrong; nothing was touched."""

    exit_status = ExitCode.USAGE_ERROR


class UnitError(InputError, ValueError):
    """A quantity string could not be parsed into the expected kind of unit."""


class ConfigError(InputError):
    """One problem in a configuration file, located as precisely as possible."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.column = column
        self.field = field
        super().__init__(message)
        self.message = self._render(message)

    def _render(self, message: str) -> str:
        where = self.path or "<input>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        field = f" [{self.field}]" if self.field else ""
        return f"{where}:{field} {message}"


class ConfigErrors(InputError):
    """Several configuration problems, all reported at once."""

    def __init__(self, errors: Sequence[ConfigError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(e.message for e in self.errors))


class InfraError(KvgateError):
    """Something outside kvgate failed: a node, a network link, an engine, a disk."""

    exit_status = ExitCode.INFRA_FAULT


class StorageFull(InfraError):
    """A local disk kvgate writes to (reports, evidence) is full or over quota: a fault (exit 4),
    never a bug; what was written before stays."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class NotAvailableError(KvgateError):
    """A feature that is not built yet. It must never be mistaken for a pass."""

    exit_status = ExitCode.USAGE_ERROR
