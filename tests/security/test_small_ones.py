"""Finding 9: the small ones.

Campaign names could end in a newline (``$`` in a regex); Markdown reports could be forged through
a target name (``|`` and newlines); ``@cert-authority`` / ``@revoked`` known_hosts lines made every
node "unreachable" with "Incorrect padding". Now: full-match names, Markdown cells and code spans
escaped, revoked keys refused with a clear message, CA lines skipped with a warning."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
from pydantic import ValidationError

from harness.config.inventory import StorageTarget
from harness.remote.base import HostKeyError
from harness.remote.commands import check_env
from harness.remote.ssh import SSHExecutor
from harness.report.render import _md_cell, _md_code
from harness.store.campaign import Campaign, CampaignError
from tests.support.sshd import SshCluster

Factory = Callable[..., SshCluster]


@pytest.mark.parametrize("name", ["abc\n", "abc\nG1", "G1\n"])
def test_names_with_a_trailing_newline_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(CampaignError):
        Campaign.open(tmp_path, name, inventory_path=tmp_path / "i", profile_path=tmp_path / "p")
    with pytest.raises(Exception, match="invalid environment variable name"):
        check_env({"HF_TOKEN\n": "x"})


def test_markdown_cannot_be_forged_through_a_name() -> None:
    evil = "t1 | PASS |\n| forged | row"
    assert "\n" not in _md_cell(evil) and "|" not in _md_cell(evil).replace("\\|", "")
    code = _md_code("nodes.n1.storage.t`x | y\nz.bw")
    assert "`" not in code and "\n" not in code and "|" not in code.replace("\\|", "")
    assert "\\<script" in _md_cell("<script>alert(1)</script>")
    with pytest.raises(ValidationError):
        StorageTarget(name=evil, path="/mnt/x")


def _ex(cluster: SshCluster) -> SSHExecutor:
    return SSHExecutor.from_inventory(cluster.inventory, "node0")  # type: ignore[arg-type]


@pytest.mark.ssh
def test_cert_authority_lines_are_skipped_and_revoked_keys_refused(ssh_cluster: Factory,
                                                                   caplog: Any) -> None:
    cluster = ssh_cluster(1)
    node = cluster.nodes[0]
    good = node.host_key_lines()
    key_type, key_b64 = good[0].split()[1:3]
    ca = f"@cert-authority *.example.com {key_type} {key_b64}"
    cluster.known_hosts.write_text(ca + "\n" + "\n".join(good) + "\n")
    with _ex(cluster) as ex:
        assert ex.run(["true"]).ok  # the CA line no longer breaks the file
    assert any("@cert-authority line skipped" in r.getMessage() for r in caplog.records)
    revoked = [f"@revoked * {line.split()[1]} {line.split()[2]}" for line in good]
    cluster.known_hosts.write_text("\n".join(revoked + good) + "\n")
    with pytest.raises(HostKeyError, match="marked @revoked"):
        _ex(cluster).run(["true"])
    # revoked and not otherwise known: refused even under trust-on-first-use, and not recorded
    cluster.known_hosts.write_text("\n".join(revoked) + "\n")
    with pytest.raises(HostKeyError, match="marked @revoked"):
        SSHExecutor.from_inventory(cluster.inventory, "node0", accept_new_host_keys=True).run(["true"])
    assert cluster.known_hosts.read_text() == "\n".join(revoked) + "\n"
