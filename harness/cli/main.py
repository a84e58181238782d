"""Entry point of the ``kvgate`` command."""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
import tempfile
import traceback
from collections.abc import Sequence

from harness import __version__
from harness.errors import KvgateError
from harness.exitcodes import EXIT_CODE_HELP, ExitCode

# One module per command, each with register(subparsers); see docs/ARCHITECTURE.md.
COMMANDS: tuple[str, ...] = (
    "validate", "show", "ping", "facts", "probe", "load", "sim", "gate", "report", "sign", "verify", "demo",
    "estimate",
    "nightly", "history", "export",
    "schema", "init",
    "soak",
    "plan",
    "cliff",
    "bandwidth",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kvgate",
        description="Gated benchmark and acceptance tests for KV-cache storage in LLM inference.",
        epilog="exit codes:\n" + EXIT_CODE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"kvgate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"harness.cli.cmd_{name}")
        module.register(sub)
    return parser


def _internal_error(exc: BaseException) -> int:
    fd, path = tempfile.mkstemp(prefix="kvgate-crash-", suffix=".txt")
    with os.fdopen(fd, "w") as fh:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=fh)
    print(f"kvgate: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
    print(f"kvgate: this is a bug in kvgate; the traceback is in {path}", file=sys.stderr)
    return int(ExitCode.INTERNAL_ERROR)


def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the command; returns the exit code (never raises for user errors)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code) if isinstance(exc.code, int) else int(ExitCode.USAGE_ERROR)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return int(ExitCode.USAGE_ERROR)
    try:
        return int(args.func(args))
    except KvgateError as exc:
        print(f"kvgate: error: {exc}", file=sys.stderr)
        return int(exc.exit_status)
    except KeyboardInterrupt:
        print("kvgate: interrupted; results taken so far are kept", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        return int(ExitCode.OK)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # a full disk is a fault, not a bug (exit 4)
            print(f"kvgate: error: {exc.strerror}: {exc.filename or 'a local file'} (free space and run again "
                  "with --resume: what was recorded before is kept)", file=sys.stderr)
            return int(ExitCode.INFRA_FAULT)
        return _internal_error(exc)
    except Exception as exc:  # noqa: BLE001 - last line of defence: no traceback for users
        return _internal_error(exc)


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
