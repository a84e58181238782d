"""Process exit codes of the ``kvgate`` command, as an enum (only the CLI calls ``sys.exit``)."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """What a ``kvgate`` exit status means.

    * ``OK`` (0): the command did what was asked; for a gate, every blocker check passed.
    * ``GATE_FAILED`` (1): a blocker check failed (or was not run).
    * ``USAGE_ERROR`` (2): bad command line or bad input file; nothing was touched.
    * ``INCONCLUSIVE`` (3): not enough samples to decide a blocker check.
    * ``INFRA_FAULT`` (4): a node was unreachable, an engine did not start, a disk filled up.
    * ``INTERNAL_ERROR`` (5): a bug in kvgate; the traceback is saved, please report it.
    * ``INTERRUPTED`` (130): stopped by Ctrl-C; everything taken so far is kept.
    """

    OK = 0
    GATE_FAILED = 1
    USAGE_ERROR = 2
    INCONCLUSIVE = 3
    INFRA_FAULT = 4
    INTERNAL_ERROR = 5
    INTERRUPTED = 130


EXIT_CODE_HELP = "\n".join(
    f"  {code.value:<4} {code.name.lower().replace('_', ' ')}"
    for code in ExitCode
)
