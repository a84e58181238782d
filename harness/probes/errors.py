"""Errors of the storage probes.

``FioParseError`` is an input error (a saved file is not fio output); ``ProbeRefused`` is an input
error raised before anything is written (raw device without permission, too little free space,
a target that cannot be measured honestly); ``ProbeError`` is an infrastructure fault while a probe
ran (fio failed, the node helper crashed).
"""

from __future__ import annotations

from harness.errors import InfraError, InputError


class FioParseError(InputError):
    """fio output that cannot be parsed; names the file and the position (line, column, byte)."""

    def __init__(self, message: str, *, source: str, line: int | None = None, column: int | None = None,
                 offset: int | None = None) -> None:
        self.source = source
        self.line = line
        self.column = column
        self.offset = offset
        where = source
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        if offset is not None:
            where += f" (byte {offset})"
        super().__init__(f"{where}: {message}")


class ProbeRefused(InputError):
    """A probe that must not run as configured; nothing was written."""

    def __init__(self, message: str, *, node: str, target: str) -> None:
        self.node = node
        self.target = target
        super().__init__(f"node {node}, target {target}: {message}")


class ProbeError(InfraError):
    """A probe failed while running on a node."""

    def __init__(self, message: str, *, node: str, target: str | None = None, detail: str = "") -> None:
        self.node = node
        self.target = target
        self.detail = detail
        where = f"node {node}" + (f", target {target}" if target else "")
        text = f"{where}: {message}"
        if detail.strip():
            text += "\n  " + detail.strip().replace("\n", "\n  ")
        super().__init__(text)
