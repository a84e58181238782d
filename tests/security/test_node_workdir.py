"""Finding 3: symlink clobber in the node workdir.

The default workdir (``/tmp/kvgate``) was never checked for ownership and the detached launcher's
``>"$out"`` followed a symbolic link another user had planted: a root-owned file was truncated.
Now the workdir is per user (``/var/tmp/kvgate-<user>``), created 0700, and refused when it or a
parent belongs to another user, is a link another user owns, or is writable by others; log files
are opened with noclobber in a directory only we can write.

The tests run as root here (as the red team did); uid 65534 (nobody) plays the other user."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.config.inventory import Inventory
from harness.remote.detached import UnsafeWorkdir, ensure_workdir
from harness.remote.local import LocalExecutor

OTHER = 65534


def _shared_tmp(tmp_path: Path) -> Path:
    """A /tmp-like directory: root-owned, world-writable, sticky."""
    t = tmp_path / "tmp"
    t.mkdir()
    t.chmod(0o1777)
    return t


@pytest.fixture()
def victim(tmp_path: Path) -> Path:
    v = tmp_path / "root-owned-file"
    v.write_text("important\n")
    return v


def test_planted_workdir_with_symlinked_log_is_refused(tmp_path: Path, victim: Path) -> None:
    assert os.geteuid() == 0, "this reproduction needs root to play another user (CI runs as root)"
    shared = _shared_tmp(tmp_path)
    planted = shared / "kvgate"
    planted.mkdir()
    os.chown(planted, OTHER, OTHER)
    (planted / "engine.out").symlink_to(victim)
    with LocalExecutor("n1") as ex, pytest.raises(UnsafeWorkdir, match="owned by uid 65534"):
        ex.start_detached(["echo", "hello"], workdir=str(planted), name="engine")
    assert victim.read_text() == "important\n"


def test_planted_symlink_as_workdir_is_refused(tmp_path: Path, victim: Path) -> None:
    shared = _shared_tmp(tmp_path)
    target = tmp_path / "etc-like"
    target.mkdir()
    link = shared / "kvgate"
    link.symlink_to(target)
    os.lchown(link, OTHER, OTHER)
    with LocalExecutor("n1") as ex:
        with pytest.raises(UnsafeWorkdir, match="symbolic link owned by uid 65534"):
            ex.start_detached(["echo", "hi"], workdir=str(link / "engines"), name="engine")
        with pytest.raises(UnsafeWorkdir, match="symbolic link owned by uid 65534"):
            ensure_workdir(ex, str(link))
    assert list(target.iterdir()) == []


def test_group_or_world_writable_workdir_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "wd"
    d.mkdir()
    d.chmod(0o777)
    with LocalExecutor("n1") as ex, pytest.raises(UnsafeWorkdir, match="writable by group or others"):
        ensure_workdir(ex, str(d / "sub"))
    d.chmod(0o775)
    with LocalExecutor("n1") as ex, pytest.raises(UnsafeWorkdir, match="writable by group or others"):
        ensure_workdir(ex, str(d))


def test_fresh_workdir_is_0700_and_logs_work(tmp_path: Path) -> None:
    shared = _shared_tmp(tmp_path)
    wd = shared / "kvgate-me" / "engines"
    with LocalExecutor("n1") as ex:
        assert ensure_workdir(ex, str(wd)) == str(wd)
        assert (shared / "kvgate-me").stat().st_mode & 0o777 == 0o700
        h = ex.start_detached(["echo", "hello"], workdir=str(wd), name="job")
        for _ in range(200):
            if not ex.poll(h).running:
                break
        assert ex.poll(h).exit_code == 0
        assert (wd / "job.out").read_text() == "hello\n"
        # a second start over the old logs works (they are ours, removed first)
        h2 = ex.start_detached(["echo", "again"], workdir=str(wd), name="job")
        for _ in range(200):
            if not ex.poll(h2).running:
                break
        assert (wd / "job.out").read_text() == "again\n"


def test_default_workdir_is_per_user() -> None:
    inv = Inventory.model_validate({"cluster": "c", "nodes": [
        {"name": "a", "host": "h1", "user": "alice"}, {"name": "b", "host": "h2", "user": "bob"}]})
    assert inv.setting(inv.node("a"), "workdir") == "/var/tmp/kvgate-alice"
    assert inv.setting(inv.node("b"), "workdir") == "/var/tmp/kvgate-bob"
