"""Engines start with a clean, declared environment (issue 33 item 4).

A detached process inherits the environment of whatever starts it: the controller's (local
executor) or the node's login shell (SSH). An inherited ``LMCACHE_LOCAL_DISK=file:///dev/shm/x/``
moved the emulator's disk tier into RAM and G3 PASSed on it. So every engine, LMCache server and
``ray start`` runs through :func:`clean_argv`: a POSIX ``sh`` prologue on the node removes every
inherited variable that ``config.managedenv.scrubbed`` names (``LMCACHE_*``, ``VLLM_*``,
``KVGATE_SIM_*``, ``HF_*``, device visibility, the managed ones), except those the plan itself
sets, then ``exec``s the command. Only names travel in the argument list, never values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from harness.config.managedenv import SCRUB_PREFIXES, managed_vars

_PATTERNS = " | ".join([*(f"{p}*" for p in SCRUB_PREFIXES), *sorted(managed_vars() - {"KVGATE_MARKER"})])

# $1 = the declared names, space separated; the rest is the command. awk's ENVIRON lists every
# inherited name (values with line breaks cannot fake one); names sh cannot unset are left alone.
SCRUB = r"""keep=" $1 "; shift
for name in $(awk 'BEGIN { for (k in ENVIRON) print k }' </dev/null); do
  case "$name" in *[!A-Za-z0-9_]*|[0-9]*|'') continue ;; esac
  case "$keep" in *" $name "*) continue ;; esac
  case "$name" in
    """ + _PATTERNS + r""") unset "$name" ;;
  esac
done
exec "$@"
"""

CLEAN_ENV_NAME = "kvgate-clean-env"


def clean_argv(argv: Sequence[str], declared: Iterable[str]) -> list[str]:
    """``argv`` run with inherited engine variables removed, keeping the ``declared`` names."""
    return ["sh", "-c", SCRUB, CLEAN_ENV_NAME, " ".join(sorted(set(declared))), *argv]


def original_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """The command inside :func:`clean_argv` (for logs and evidence), or ``argv`` itself."""
    if len(argv) >= 5 and argv[0] == "sh" and argv[1] == "-c" and argv[3] == CLEAN_ENV_NAME:
        return tuple(argv[5:])
    return tuple(argv)
