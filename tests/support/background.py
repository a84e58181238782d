"""Background work in a test whose failure fails the test, with its traceback, where the test joins it.

pytest turns an unhandled thread exception into an error only when the test's phase ends, after the
test's own assertions have already failed with a misleading message ("no chunk file was stored"
while the real cause was a watcher thread that died on a vanished directory). ``Background`` keeps
the exception and raises it in the test's thread as soon as the test stops or checks the work.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Optional


class BackgroundError(AssertionError):
    """The background work of a test raised: the original exception is its ``__cause__``."""


class Background:
    """Run ``target(stop)`` in a thread for a ``with`` block; ``stop`` is set when the block ends.

    Leaving the block joins the thread and re-raises whatever it raised; a thread still running
    ``join_timeout`` seconds after ``stop`` was set fails the test too (it would outlive it)."""

    def __init__(self, target: Callable[[threading.Event], None], *, name: str = "test-background",
                 join_timeout: float = 30.0) -> None:
        self.stop = threading.Event()
        self._target = target
        self._error: Optional[BaseException] = None
        self._join_timeout = join_timeout
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        try:
            self._target(self.stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread by check()
            self._error = exc

    def __enter__(self) -> Background:
        self._thread.start()
        return self

    def check(self) -> None:
        """Raise the background work's exception now, if it has raised one."""
        if self._error is not None:
            raise BackgroundError(f"background thread {self._thread.name!r} raised "
                                  f"{type(self._error).__name__}: {self._error}") from self._error

    def __exit__(self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.stop.set()
        self._thread.join(self._join_timeout)
        if self._thread.is_alive():
            raise BackgroundError(f"background thread {self._thread.name!r} did not stop within "
                                  f"{self._join_timeout:.0f} s of being told to")
        self.check()


def files_now(root: Path, suffix: str) -> Iterator[Path]:
    """The files under ``root`` ending in ``suffix`` at this moment, for a watcher that looks while
    other processes create and remove directories there: one that vanishes mid-walk is skipped
    (``os.walk`` ignores the error), where ``Path.rglob`` raised FileNotFoundError."""
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            if name.endswith(suffix):
                yield Path(dirpath, name)
