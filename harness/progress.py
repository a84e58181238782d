"""Progress for long work: a status line that rewrites itself on a terminal and prints a line at
most every ``interval`` seconds elsewhere (CI logs). Stdlib only."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from harness.terminaltext import for_terminal


class Progress:
    """``with Progress("G2 sweep", total=6) as p: p.update(1, "c8 rep 1")``."""

    def __init__(self, label: str, total: int | None = None, *, stream: TextIO | None = None,
                 interval: float = 5.0, enabled: bool = True) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.enabled = enabled
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last = 0.0
        self._start = time.monotonic()
        self._width = 0

    def __enter__(self) -> Progress:
        self.status("started", force=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish("failed" if exc[0] else "done")

    def _line(self, text: str) -> str:
        elapsed = time.monotonic() - self._start
        count = f" {self.done}/{self.total}" if self.total else (f" {self.done}" if self.done else "")
        return for_terminal(f"[{self.label}]{count} {elapsed:6.1f}s {text}")  # text may be a node's or server's

    def status(self, text: str, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        line = self._line(text)
        if self._tty:
            pad = max(0, self._width - len(line))
            self.stream.write("\r" + line + " " * pad)
            self._width = len(line)
            self.stream.flush()
        elif force or now - self._last >= self.interval:
            self.stream.write(line + "\n")
            self.stream.flush()
            self._last = now

    def update(self, n: int = 1, text: str = "") -> None:
        self.done += n
        self.status(text, force=self.total is not None and self.done >= self.total)

    def finish(self, text: str = "done") -> None:
        if not self.enabled:
            return
        line = self._line(text)
        if self._tty:
            self.stream.write("\r" + line + " " * max(0, self._width - len(line)) + "\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
