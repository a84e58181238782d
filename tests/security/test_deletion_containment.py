"""Finding 2: ``rm -rf`` outside kvgate's directories.

The cleanup guard was a substring test for ``/kvgate-kv/``; ``remote_url:
file:///t/kvgate-kv/../../victim`` made G2 delete ``victim/``. Now the URL is refused at load, and
one function (``harness.remote.scratch``) deletes only a directory kvgate created and marked for
the campaign, checked on the node: ``..``, symbolic links, foreign or unmarked directories, other
campaigns' directories and bind-like tricks are refused and reported."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.config.profile import LMCacheSettings
from harness.remote.local import LocalExecutor
from harness.remote.scratch import MARKER, create_owned_dir, remove_owned_dir, remove_stale_dirs

OWNER = "campaign-1234"


@pytest.fixture()
def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    v.mkdir()
    (v / "precious.txt").write_text("keep me")
    return v


def test_file_url_with_dotdot_is_refused_at_load() -> None:
    with pytest.raises(ValidationError, match=r"contains '\.\.'"):
        LMCacheSettings(remote_url="file:///t/kvgate-kv/../../victim")
    assert LMCacheSettings(remote_url="lm://host:65432").remote_url == "lm://host:65432"


def test_dotdot_path_refused_even_when_sent_directly(tmp_path: Path, victim: Path) -> None:
    ex = LocalExecutor("n1")
    owned = tmp_path / "kvgate-kv"
    assert create_owned_dir(ex, str(owned), OWNER) == "created"
    r = remove_owned_dir(ex, f"{owned}/../victim", OWNER)
    assert r.outcome == "refused" and "'..'" in r.reason and not r.removed
    assert (victim / "precious.txt").exists()


def test_unmarked_directory_is_never_deleted(victim: Path) -> None:
    r = remove_owned_dir(LocalExecutor("n1"), str(victim), OWNER)
    assert r.outcome == "refused" and "no kvgate marker" in r.reason
    assert (victim / "precious.txt").exists()


def test_preexisting_directory_is_not_adopted(victim: Path) -> None:
    """A user's file:// directory that existed before kvgate is not marked, so never deleted."""
    ex = LocalExecutor("n1")
    assert create_owned_dir(ex, str(victim), OWNER) == "foreign"
    assert not (victim / MARKER).exists()
    assert remove_owned_dir(ex, str(victim), OWNER).outcome == "refused"
    assert (victim / "precious.txt").exists()


def test_symlink_to_victim_is_refused(tmp_path: Path, victim: Path) -> None:
    ex = LocalExecutor("n1")
    (victim / MARKER).write_text(OWNER + "\n")  # even a marker planted in the victim does not help
    link = tmp_path / "kvgate-fio-x"
    link.symlink_to(victim)
    r = remove_owned_dir(ex, str(link), OWNER)
    assert r.outcome == "refused" and "symbolic link" in r.reason
    assert (victim / "precious.txt").exists() and link.is_symlink()


def test_symlinked_parent_is_refused(tmp_path: Path, victim: Path) -> None:
    ex = LocalExecutor("n1")
    real = tmp_path / "real"
    assert create_owned_dir(ex, str(real / "kvgate-kv"), OWNER) == "created"
    alias = tmp_path / "alias"
    alias.symlink_to(real)
    r = remove_owned_dir(ex, str(alias / "kvgate-kv"), OWNER)
    assert r.outcome == "refused" and (real / "kvgate-kv").is_dir()


def test_links_inside_an_owned_directory_are_not_followed(tmp_path: Path, victim: Path) -> None:
    ex = LocalExecutor("n1")
    owned = tmp_path / "kvgate-fio-run"
    assert create_owned_dir(ex, str(owned), OWNER) == "created"
    (owned / "escape").symlink_to(victim)
    (owned / "file").write_text("x")
    r = remove_owned_dir(ex, str(owned), OWNER)
    assert r.outcome == "removed" and r.exit_code == 0 and r.duration_s >= 0
    assert not owned.exists() and (victim / "precious.txt").exists()


def test_other_campaigns_directory_is_refused(tmp_path: Path) -> None:
    ex = LocalExecutor("n1")
    d = tmp_path / "kvgate-kv"
    assert create_owned_dir(ex, str(d), "other-campaign") == "created"
    assert create_owned_dir(ex, str(d), OWNER) == "other other-campaign"
    r = remove_owned_dir(ex, str(d), OWNER)
    assert r.outcome == "refused" and "another campaign" in r.reason and d.is_dir()


def test_marker_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    ex = LocalExecutor("n1")
    d = tmp_path / "kvgate-x"
    d.mkdir()
    src = tmp_path / "m"
    src.write_text(OWNER + "\n")
    os.symlink(src, d / MARKER)
    assert remove_owned_dir(ex, str(d), OWNER).outcome == "refused" and d.is_dir()


def test_stale_scratch_of_this_campaign_only_is_swept(tmp_path: Path) -> None:
    """After kill -9: ``--resume`` removes this campaign's kvgate-fio-* directories, no others."""
    ex = LocalExecutor("n1")
    ours = tmp_path / "kvgate-fio-1"
    theirs = tmp_path / "kvgate-fio-2"
    plain = tmp_path / "kvgate-fio-3"
    create_owned_dir(ex, str(ours), OWNER)
    create_owned_dir(ex, str(theirs), "someone-else")
    plain.mkdir()
    removals = remove_stale_dirs(ex, str(tmp_path), "kvgate-fio-", OWNER)
    assert [r.path for r in removals] == [str(ours)] and removals[0].removed
    assert not ours.exists() and theirs.is_dir() and plain.is_dir()


def test_root_and_top_level_refused() -> None:
    ex = LocalExecutor("n1")
    for p in ("/", "/tmp", "relative", "/a\nb/c"):
        assert remove_owned_dir(ex, p, OWNER).outcome == "refused"
