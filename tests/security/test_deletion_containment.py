"""Finding 2: ``rm -rf`` outside kvgate's directories.

The cleanup guard was a substring test for ``/kvgate-kv/``; ``remote_url:
file:///t/kvgate-kv/../../victim`` made G2 delete ``victim/``. Now the URL is refused at load, and
one function (``harness.remote.scratch``) deletes only a directory kvgate created and marked for
the campaign, checked on the node: ``..``, symbolic links, foreign or unmarked directories, other
campaigns' directories and bind-like tricks are refused and reported."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.config.profile import LMCacheSettings
from harness.deletion import DeletionRefused, remove_file
from harness.engines.base import EnginePlan
from harness.engines.lifecycle import EngineStartError
from harness.engines.sim import SimEngine
from harness.ports import free_port
from harness.remote.local import LocalExecutor
from harness.remote.scratch import (
    ENGINE_OWNER,
    MARKER,
    create_owned_dir,
    remove_named_child,
    remove_owned_dir,
    remove_owned_file,
    remove_stale_dirs,
)

OWNER = "campaign-1234"


@pytest.fixture()
def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    v.mkdir()
    (v / "precious.txt").write_text("keep me")
    return v


def test_file_url_with_dotdot_is_refused_at_load() -> None:
    with pytest.raises(ValidationError, match=r"contains '\.\.'"):
        LMCacheSettings(remote_url="fs:///t/kvgate-kv/../../victim")
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



def test_a_named_child_is_removed_only_directly_under_its_parent_and_by_its_name(tmp_path: Path, victim: Path) -> None:
    """The cgroup remover's helper (a kvgate-* directory removed with rmdir, its marker file with rm -f):
    another parent, a '..' on the way, a name without the prefix or suffix, or the bare prefix is refused."""
    ex = LocalExecutor("n1")
    parent = tmp_path / "cgroups"
    (parent / "kvgate-abc").mkdir(parents=True)
    (parent / "tok.json").write_text("{}")
    for path, kw in ((str(victim / "precious.txt"), {"suffix": ".txt"}),
                     (f"{parent}/../victim/precious.txt", {"suffix": ".txt"}),
                     (f"{parent}/other", {"prefix": "kvgate-", "directory": True}),
                     (f"{parent}/kvgate-", {"prefix": "kvgate-", "directory": True}),
                     (f"{parent}/kvgate-abc", {"directory": True})):
        with pytest.raises(ValueError, match="refusing to remove"):
            remove_named_child(ex, path, parent=str(parent), **kw)  # type: ignore[arg-type]
    assert (victim / "precious.txt").read_text() == "keep me"
    assert remove_named_child(ex, f"{parent}/kvgate-abc", parent=str(parent), prefix="kvgate-", directory=True)
    assert remove_named_child(ex, f"{parent}/tok.json", parent=str(parent), suffix=".json")
    assert sorted(parent.iterdir()) == []


# --- round three (#29 item 1): one helper for every deletion ---------------------------------------

HARNESS = Path(__file__).resolve().parents[2] / "harness"
# The two modules that delete: the local helper and the remote one.
DELETERS = {"deletion.py", "remote/scratch.py"}
# Shell scripts that remove files they themselves name inside a directory the same script has just
# checked (the detached launcher's own log and pid files after safe_dir; the facts collector's
# ``.kvgate-write-probe-$$`` it just created). Each is counted: a new one fails the test.
SHELL_RM_ALLOWED = {"remote/detached.py": 1, "facts/collect.py": 1}
_DELETE_CALLS = {"unlink", "rmtree", "rmdir", "removedirs"}
_SHELL_RM = re.compile(r"(^|[\s;&|({`])(rm|rmdir|unlink|shred)(\s|$)|-delete\b")


def _deletions(tree: ast.AST) -> tuple[list[int], int]:
    calls: list[int] = []
    shell = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr, base = node.func.attr, node.func.value
            base_name = base.id if isinstance(base, ast.Name) else ""
            if attr in _DELETE_CALLS or (attr == "remove" and (base_name == "os" or "sftp" in base_name)):
                calls.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in ("rm", "rmdir", "unlink", "shred"):
                calls.append(node.lineno)
            else:
                shell += len(_SHELL_RM.findall(node.value))
    return calls, shell


def test_every_deletion_goes_through_the_helpers() -> None:
    """An AST walk of harness/: no unlink / rmtree / rmdir / os.remove / sftp.remove call and no
    ``rm`` argument or shell ``rm`` outside harness/deletion.py and harness/remote/scratch.py."""
    offenders: list[str] = []
    for path in sorted(HARNESS.rglob("*.py")):
        rel = path.relative_to(HARNESS).as_posix()
        if rel in DELETERS:
            continue
        calls, shell = _deletions(ast.parse(path.read_text(), filename=str(path)))
        offenders += [f"{rel}:{line}" for line in calls]
        if shell != SHELL_RM_ALLOWED.get(rel, 0):
            offenders.append(f"{rel}: {shell} shell rm (allowed {SHELL_RM_ALLOWED.get(rel, 0)})")
    assert offenders == []


def test_the_walk_sees_each_form_it_forbids() -> None:
    calls, shell = _deletions(ast.parse(
        "import os, shutil\nos.unlink(p)\nshutil.rmtree(p)\nPath(p).unlink()\nos.remove(p)\n"
        "sftp.remove(p)\nex.run(['rm', '-rf', p])\nx = 'cd /; rm -rf -- \"$p\"'\ny = 'find . -delete'\n"
        "s.remove(3)\n"))
    assert calls == [2, 3, 4, 5, 6, 7] and shell == 2


def test_prometheus_dir_outside_the_instance_is_never_emptied(tmp_path: Path, victim: Path) -> None:
    """The finding: PROMETHEUS_MULTIPROC_DIR = <instance>/../../victim passed the prefix test, and
    every engine start ran ``rm -rf`` on the victim. Now only kvgate's own directory is emptied."""
    instance = tmp_path / "engines" / "demo" / "baseline-0"
    plan = _plan(instance, {"PROMETHEUS_MULTIPROC_DIR": f"{instance}/../../../victim"})
    with pytest.raises(EngineStartError, match="not the directory kvgate manages"):
        SimEngine().start(LocalExecutor("n1"), plan)
    assert (victim / "precious.txt").read_text() == "keep me"


def test_prometheus_dir_not_marked_by_kvgate_is_refused(tmp_path: Path) -> None:
    instance = tmp_path / "inst"
    prom = instance / "prometheus-multiproc"
    prom.mkdir(parents=True)
    (prom / "user.db").write_text("x")
    plan = _plan(instance, {"PROMETHEUS_MULTIPROC_DIR": str(prom)})
    with pytest.raises(EngineStartError, match="no kvgate marker"):
        SimEngine().start(LocalExecutor("n1"), plan)
    assert (prom / "user.db").exists()


def test_prometheus_dir_kvgate_made_is_emptied(tmp_path: Path) -> None:
    instance = tmp_path / "inst"
    prom = instance / "prometheus-multiproc"
    ex = LocalExecutor("n1")
    instance.mkdir(mode=0o700)
    assert create_owned_dir(ex, str(prom), ENGINE_OWNER) == "created"
    (prom / "old.db").write_text("x")
    inst = SimEngine().start(ex, _plan(instance, {"PROMETHEUS_MULTIPROC_DIR": str(prom)}))
    ex.stop(inst.handle, grace=5.0)
    assert prom.is_dir() and not (prom / "old.db").exists() and (prom / MARKER).exists()


def _plan(instance: Path, env: dict[str, str]) -> EnginePlan:
    return EnginePlan(
        kind="sim", node="n1", profile="p", arm="baseline", instance_index=0, argv=("/bin/sleep", "30"),
        env=env, files={}, host="127.0.0.1", port=free_port(), external_host="127.0.0.1", devices=(),
        platform="cpu", instance_dir=str(instance), name="kvgate-test", served_model_name="m")


def test_local_helper_refuses_escapes(tmp_path: Path, victim: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / "a.tmp").write_text("x")
    for bad, why in ((f"{own}/../victim/precious.txt", "normalised"),
                     (str(victim / "precious.txt"), "marker"),
                     (f"{own}//a.tmp", "normalised")):
        with pytest.raises(DeletionRefused, match=why):
            remove_file(bad, within=own, marker=".tmp") if why != "marker" else remove_file(
                bad, within=own, marker=".kvgate-")
    (victim / "x.tmp").write_text("keep")
    (own / "link").symlink_to(victim)
    with pytest.raises(DeletionRefused, match="outside"):
        remove_file(own / "link" / "x.tmp", within=own, marker=".tmp")
    assert (victim / "x.tmp").exists() and (victim / "precious.txt").exists()
    assert remove_file(own / "a.tmp", within=own, marker=".tmp") and not (own / "a.tmp").exists()
    assert remove_file(own / "a.tmp", within=own, marker=".tmp") is False


def test_remote_file_helper_needs_a_marked_directory(tmp_path: Path, victim: Path) -> None:
    ex = LocalExecutor("n1")
    assert remove_owned_file(ex, str(victim / "precious.txt"), None).outcome == "refused"
    owned = tmp_path / "kvgate-fio-1"
    create_owned_dir(ex, str(owned), OWNER)
    (owned / "kvgate-engine-probe").write_text("x")
    assert remove_owned_file(ex, str(owned / "kvgate-engine-probe"), None).outcome == "removed"
    assert remove_owned_file(ex, str(owned / MARKER), None).outcome == "refused"
    assert (victim / "precious.txt").exists()
