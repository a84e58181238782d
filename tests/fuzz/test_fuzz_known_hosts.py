"""known_hosts host matching (#29 item 2) against OpenSSH itself: for random host fields (wildcards,
negation, lists, brackets, stray ``|`` and ``@``) and a random name, the lines kvgate says cover the
name are the lines ``ssh-keygen -F`` finds. One ssh-keygen run per example, so the fuzz profile's
example count is capped here."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.security.openssh_hosts import key_text, keygen_found, kvgate_found
from tests.support.sshd import KeyStore

_FIELD = st.text(alphabet="ab.19AB*?!,[]:|@-", max_size=14)
_NAME = st.text(alphabet="ab.19AB*?!,[]:|-", min_size=1, max_size=14).filter(lambda s: not s.startswith("-"))


@settings(max_examples=min(settings.default.max_examples, 1500))
@given(st.lists(_FIELD, min_size=1, max_size=12), _NAME)
def test_known_hosts_matching_agrees_with_ssh_keygen(ssh_keys: KeyStore, fields: list[str], name: str) -> None:
    key = key_text(Path(f"{ssh_keys.host_keys(0)[0]}.pub"))  # the session's keys: generated once
    with tempfile.TemporaryDirectory() as tmp:
        kh = Path(tmp) / "known_hosts"
        kh.write_text("".join(f"{field} {key}\n" for field in fields))
        assert kvgate_found(kh, name) == keygen_found(kh, name)
