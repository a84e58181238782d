"""Secrets reach engines by environment, never by argv where the engine supports it.

``engine.extra_args`` are passed as given, except secret flags (``harness.redact.is_secret_name``):
a flag the engine also reads from an environment variable (``--api-key`` -> ``VLLM_API_KEY``) is
moved there, so ``ps`` and the recorded argv never show it (the environment itself is handed to
the detached launcher on stdin, see ``harness.remote.detached``). A secret flag with no
environment equivalent stays on the command line and the plan says so in its notes (reports show
them); its value is still masked in every file kvgate writes.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.redact import is_secret_name, normalise_name

# flag (normalised) -> environment variable the engine reads instead (vLLM's OpenAI server reads
# VLLM_API_KEY when --api-key is not given: vllm/entrypoints/openai/api_server.py).
FLAG_ENV: dict[str, str] = {"api_key": "VLLM_API_KEY"}


def move_secret_args(extra_args: Sequence[str]) -> tuple[list[str], dict[str, str], list[str]]:
    """(argv without movable secret flags, environment for them, notes for the plan)."""
    argv: list[str] = []
    env: dict[str, str] = {}
    notes: list[str] = []
    args = list(extra_args)
    i = 0
    while i < len(args):
        arg = args[i]
        name, sep, value = arg.partition("=")
        if arg.startswith("-") and is_secret_name(name):
            flag = name
            if not sep:
                if i + 1 >= len(args):
                    argv.append(arg)
                    break
                value = args[i + 1]
                i += 1
            var = FLAG_ENV.get(normalise_name(flag))
            if var is not None:
                env[var] = value
                notes.append(f"secret {flag} passed to the engine as environment variable {var} (not argv)")
            else:
                argv += [flag, value]
                notes.append(f"secret {flag} is passed on the command line: the engine has no environment "
                             "variable for it, so it is visible in the node's process list")
        else:
            argv.append(arg)
        i += 1
    return argv, env, notes


def plan_secrets(env: dict[str, str], argv: Sequence[str]) -> list[str]:
    """The secret values a plan carries (secret-named environment variables, values of secret
    flags), so that text the engine writes (its logs echo its arguments) can be masked."""
    out = [v for k, v in env.items() if is_secret_name(k) and v]
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(arg)
            hide_next = False
            continue
        name, sep, value = arg.partition("=")
        if sep and is_secret_name(name) and value:
            out.append(value)
        elif arg.startswith("-") and not sep and is_secret_name(arg):
            hide_next = True
    return out
