"""Loading a private key, with its passphrase from the inventory, an environment variable, a file
or a prompt. The passphrase is never logged, stored in an error, or kept after the key is decrypted."""

from __future__ import annotations

import getpass
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import paramiko

from harness.remote.base import Unreachable

_CACHE: dict[tuple[str, float], paramiko.PKey] = {}
_CACHE_LOCK = threading.Lock()  # one prompt per key per process, even from a Fleet of threads


@dataclass(frozen=True)
class PassphraseSource:
    """Where a key's passphrase comes from; ``value`` is a callable so it is not held in plain sight
    (e.g. ``SecretStr.get_secret_value``)."""

    value: Optional[Callable[[], str]] = None
    env: Optional[str] = None
    file: Optional[str] = None
    prompt: Optional[Callable[[str], str]] = None

    def __repr__(self) -> str:  # never show the secret
        shown = "set" if self.value else None
        return f"PassphraseSource(env={self.env!r}, file={self.file!r}, value={shown})"

    def get(self, node: str, key_path: str) -> str:
        if self.value is not None:
            return self.value()
        if self.env:
            if self.env not in os.environ:
                raise Unreachable(f"key {key_path} is passphrase-protected and passphrase_env names "
                                  f"{self.env}, which is not set", host=node)
            return os.environ[self.env]
        if self.file:
            try:
                with open(os.path.expanduser(self.file), encoding="utf-8") as fh:
                    return fh.read().rstrip("\r\n")
            except OSError as exc:
                raise Unreachable(f"cannot read passphrase_file {self.file}: {exc.strerror}",
                                  host=node) from exc
        prompt = self.prompt
        if prompt is None and sys.stdin is not None and sys.stdin.isatty():
            prompt = getpass.getpass
        if prompt is None:
            raise Unreachable(f"key {key_path} is passphrase-protected: set passphrase_env or "
                              "passphrase_file for this node in the inventory, or run interactively "
                              "to be asked",
                              host=node)
        return prompt(f"Passphrase for {key_path}: ")


class _NeedsPassphrase(Exception):
    pass


def _from_path(path: str) -> paramiko.PKey:
    try:
        return paramiko.PKey.from_path(path)
    except paramiko.PasswordRequiredException as exc:  # PEM keys
        raise _NeedsPassphrase() from exc
    except TypeError as exc:  # OpenSSH-format keys: cryptography's "password was not provided"
        if "password" in str(exc).lower():
            raise _NeedsPassphrase() from exc
        raise


def clear_cache() -> None:
    """Forget decrypted keys (tests; or after a key file was replaced in place)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def load_key(path: str, node: str, passphrase: PassphraseSource) -> paramiko.PKey:
    """The decrypted key at ``path`` (ed25519, RSA, ECDSA; OpenSSH or PEM format)."""
    full = os.path.expanduser(path)
    try:
        mtime = os.stat(full).st_mtime
    except OSError as exc:
        raise Unreachable(f"identity_file {path}: {exc.strerror}", host=node) from exc
    with _CACHE_LOCK:
        cached = _CACHE.get((full, mtime))
        if cached is not None:
            return cached
        try:
            key = _from_path(full)
        except _NeedsPassphrase:
            secret = passphrase.get(node, path)
            try:
                # cryptography wants bytes although paramiko annotates str
                key = paramiko.PKey.from_path(full, secret.encode())  # type: ignore[arg-type]
            except (paramiko.SSHException, ValueError, TypeError) as exc:
                # The exception text is paramiko's, never the passphrase itself.
                raise Unreachable(f"cannot decrypt key {path}: wrong passphrase? ({type(exc).__name__})",
                                  host=node) from None
            finally:
                del secret
        except (paramiko.SSHException, ValueError, OSError) as exc:
            raise Unreachable(f"cannot load identity_file {path}: {exc}", host=node) from exc
        _CACHE[(full, mtime)] = key
        return key
