"""The campaign directory ``reports/<campaign>/``: one writer at a time, nothing lost in a crash.

Layout::

    reports/<campaign>/
      .lock                 flock'd by the one process writing the campaign (holds its pid)
      campaign.json         inventory and profile text as used + sha256, kvgate version, git commit,
                            start time, operator (written once, atomically)
      runs.jsonl            one line per run that opened the campaign (start, pid, resume or not)
      journal.jsonl         hash-chained record of every gate run: start, verdict, digests (journal.py)
      G1/ ... G4/
        evidence/           raw outputs, node facts, fio JSON, logs (write_evidence, append_jsonl)
        evidence/commands.jsonl   every command run, with node, argv, exit code, duration, output tail
        state.jsonl         completed steps (mark_step_done), read by --resume
        result.json         the GateResult (written atomically)

Durability: whole files are replaced atomically (tmp + fsync + rename + dir fsync); JSONL is
appended and fsync'd per record and a torn last line is never read back
(``harness.store.durable``). Resuming re-opens the campaign, refuses an inventory or profile
that differs from the one it was started with, and lets a pipeline skip every step whose
``step_done(key)`` is not None.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import hashlib
import json
import os
import re
import socket
import subprocess
import uuid
from pathlib import Path, PurePosixPath
from typing import Any, Optional, Union

from pydantic import ValidationError

from harness import __version__
from harness.config.yamlsource import mask_secret_values
from harness.deletion import remove_file
from harness.errors import ConfigError, InputError
from harness.paths import project_root
from harness.redact import redact_argv, redact_data
from harness.remote.base import RunResult
from harness.store import durable
from harness.store.schema import SCHEMA_VERSION, GateResult

__all__ = ["Campaign", "GateDir", "CampaignError", "CampaignLocked", "ResultFileError", "load_result",
           "redact_argv", "result_bytes", "CAMPAIGN_FORMAT", "OUTPUT_TAIL_CHARS"]

CAMPAIGN_FORMAT = 1
OUTPUT_TAIL_CHARS = 4000  # of stdout/stderr kept per command in commands.jsonl
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_GATE = re.compile(r"^G[1-9][0-9]?\Z")


def check_campaign_name(name: str) -> None:
    """A campaign name is one folder name (checked before any path is built from it)."""
    if not _NAME.match(name):
        raise CampaignError(f"campaign name {name!r}: use letters, digits, '.', '_' and '-' (max 128)")


class CampaignError(InputError):
    """A campaign cannot be opened or written as asked."""


class CampaignLocked(CampaignError):
    """Another process is writing this campaign."""


class ResultFileError(InputError):
    """A result.json that is missing, unreadable, not a gate result or of an unknown schema version."""


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _git_commit() -> Optional[str]:
    root = project_root()
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", commit) else None


def _file_record(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CampaignError(f"cannot read {path}: {exc.strerror or exc}") from None
    # The hash is of the file as given (a resumed run must use the same file); the text kept in
    # the campaign has its secret values masked, since campaigns are shared and signed.
    # Masked in the parsed YAML tree (block scalars, quoted keys, argument lists), never by
    # editing lines; a file that is not YAML is not copied at all (only its hash).
    text = raw.decode("utf-8", "replace")
    try:
        masked: Optional[str] = mask_secret_values(text, str(path))
    except ConfigError:
        masked = None
    return {"path": str(path), "sha256": hashlib.sha256(raw).hexdigest(), "text": masked}


def _safe_relpath(name: str) -> PurePosixPath:
    rel = PurePosixPath(name)
    if not name or rel.is_absolute() or any(p in ("..", "") for p in rel.parts) or "\x00" in name:
        raise CampaignError(
            f"evidence name {name!r} must be a relative path inside the gate's evidence folder")
    return rel


def _remove_stale_temporaries(path: Path) -> None:
    # Left by a writer killed between write and rename; we hold the lock, so no writer owns them.
    for tmp in path.rglob(".*.tmp.*"):
        if tmp.is_file():
            remove_file(tmp, within=path, marker=".tmp.")


class GateDir:
    """One gate's folder in a campaign; create it with :meth:`Campaign.gate_dir`."""

    def __init__(self, path: Path, gate: str, *, create: bool = True) -> None:
        self.path = path
        self.gate = gate
        self.evidence = path / "evidence"
        if create:
            self.evidence.mkdir(parents=True, exist_ok=True)

    # -- evidence -------------------------------------------------------------------------------
    def evidence_path(self, name: str) -> Path:
        return self.evidence / _safe_relpath(name)

    def write_evidence(self, name: str, data: Union[bytes, str]) -> str:
        """Write ``evidence/<name>`` atomically; return its path relative to the gate folder."""
        path = self.evidence_path(name)
        durable.write_atomic(path, data)
        return path.relative_to(self.path).as_posix()

    def write_evidence_json(self, name: str, obj: Any) -> str:
        return self.write_evidence(name, json.dumps(redact_data(obj), indent=2, sort_keys=True, default=str) + "\n")

    def append_jsonl(self, name: str, record: dict[str, Any]) -> str:
        """Append one record to ``evidence/<name>`` (fsync'd); return the relative path."""
        path = self.evidence_path(name)
        durable.append_jsonl(path, record)
        return path.relative_to(self.path).as_posix()

    def read_jsonl(self, name: str) -> list[dict[str, Any]]:
        return durable.read_jsonl(self.evidence_path(name))

    def record_command(self, node: str, argv: Any, result: Optional[RunResult] = None, *,
                       error: Optional[str] = None) -> str:
        """Record a command run on ``node`` in ``evidence/commands.jsonl``: argv, exit code,
        duration and the tail of its output (or the error that stopped it)."""
        rec: dict[str, Any] = {"ts": _now(), "node": node, "argv": redact_argv(argv)}
        if result is not None:
            rec.update(exit_code=result.exit_code, duration_s=round(result.duration_s, 6),
                       stdout_tail=result.stdout[-OUTPUT_TAIL_CHARS:],
                       stderr_tail=result.stderr[-OUTPUT_TAIL_CHARS:])
        if error is not None:
            rec["error"] = error
        return self.append_jsonl("commands.jsonl", rec)

    def record_removal(self, removal: Any) -> str:
        """Record a deletion request (``harness.remote.scratch.Removal``) in ``commands.jsonl``."""
        rec: dict[str, Any] = {"ts": _now(), "node": removal.node, "argv": ["kvgate-rm", removal.path],
                               "exit_code": removal.exit_code, "duration_s": round(removal.duration_s, 6),
                               "outcome": removal.outcome}
        if removal.reason:
            rec["reason"] = removal.reason
        return self.append_jsonl("commands.jsonl", rec)

    # -- resumable state ------------------------------------------------------------------------
    @property
    def state_path(self) -> Path:
        return self.path / "state.jsonl"

    def mark_step_done(self, step_key: str, data: Any = None) -> None:
        """Record that ``step_key`` completed, with the data a resumed run needs (fsync'd)."""
        durable.append_jsonl(self.state_path, {"step": step_key, "done_at": _now(), "data": data})

    def step_done(self, step_key: str) -> Any:
        """The data recorded when ``step_key`` completed (the last record wins), else None.
        A step marked done with ``data=None`` returns ``{}`` so callers can test ``is not None``."""
        found: Any = None
        for rec in durable.iter_jsonl(self.state_path):
            if rec.get("step") == step_key:
                found = rec.get("data")
                if found is None:
                    found = {}
        return found

    def steps_done(self) -> list[str]:
        seen: dict[str, None] = {}
        for rec in durable.iter_jsonl(self.state_path):
            if isinstance(rec.get("step"), str):
                seen[rec["step"]] = None
        return list(seen)

    # -- result ---------------------------------------------------------------------------------
    @property
    def result_path(self) -> Path:
        return self.path / "result.json"

    def write_result(self, result: GateResult) -> Path:
        """Write ``result.json`` atomically (a reader never sees half of it)."""
        if result.gate != self.gate:
            raise CampaignError(f"result of gate {result.gate} written into the folder of {self.gate}")
        durable.write_atomic(self.result_path, result_bytes(result))
        return self.result_path

    def load_result(self) -> GateResult:
        return load_result(self.result_path)


def result_bytes(result: GateResult) -> bytes:
    """The exact bytes ``write_result`` writes (the journal records their sha256 first)."""
    return (result.model_dump_json(indent=2) + "\n").encode("utf-8")


def load_result(path: Path) -> GateResult:
    """Read a result.json; refuse a missing or torn file and an unknown schema version."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultFileError(
            f"{path}: no result file (the gate has not been evaluated in this campaign)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultFileError(f"{path}: cannot read: {exc}") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ResultFileError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ResultFileError(f"{path}: expected a JSON object, found {type(data).__name__}")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ResultFileError(
            f"{path}: [schema_version] is {version!r}; this kvgate reads schema_version {SCHEMA_VERSION} only "
            f"(kvgate {__version__}; a file of schema_version {version!r} needs the kvgate that wrote it)")
    try:
        return GateResult.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"[{'.'.join(str(p) for p in e['loc'])}] {e['msg']}" for e in exc.errors()[:10])
        raise ResultFileError(f"{path}: not a valid gate result: {problems}") from None


class Campaign:
    """An open campaign. Use :meth:`open`; close it (or use ``with``) to release the lock."""

    def __init__(self, path: Path, name: str, meta: dict[str, Any], lock_fd: Optional[int],
                 resumed: bool) -> None:
        self.path = path
        self.name = name
        self.meta = meta
        self._lock_fd = lock_fd
        self.resumed = resumed

    # -- opening --------------------------------------------------------------------------------
    @classmethod
    def open(cls, root: Path, name: str, *, inventory_path: Optional[Path] = None,
             profile_path: Optional[Path] = None, operator: Optional[str] = None,
             create: bool = True) -> Campaign:
        """Open (or create) ``root/name`` for writing and take its lock.

        A new campaign needs ``inventory_path`` and ``profile_path`` (their text is recorded).
        Re-opening an existing one (``--resume``) checks that the files given, if any, are the
        ones it was started with. Raises :class:`CampaignLocked` when another process holds it.
        """
        check_campaign_name(name)
        path = Path(root) / name
        meta_path = path / "campaign.json"
        exists = meta_path.exists()
        if not exists and not create:
            raise CampaignError(f"no campaign {name!r} under {root} (no {meta_path})")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CampaignError(f"cannot create {path}: {exc.strerror or exc}") from None
        lock_fd = cls._lock(path)
        try:
            inv = _file_record(Path(inventory_path)) if inventory_path is not None else None
            prof = _file_record(Path(profile_path)) if profile_path is not None else None
            if meta_path.exists():
                meta = cls._read_meta(meta_path)
                for label, rec in (("inventory", inv), ("profile", prof)):
                    old = meta.get(label) or {}
                    if rec is not None and old.get("sha256") != rec["sha256"]:
                        raise CampaignError(
                            f"campaign {name!r} was started with {label} {old.get('path')} "
                            f"(sha256 {str(old.get('sha256'))[:12]}...); {rec['path']} differs "
                            f"(sha256 {rec['sha256'][:12]}...). Start a new campaign instead of resuming.")
                resumed = True
            else:
                if inv is None or prof is None:
                    raise CampaignError(f"a new campaign ({name}) needs the inventory and the profile files")
                meta = {
                    "format": CAMPAIGN_FORMAT, "name": name, "id": uuid.uuid4().hex,
                    "started_at": _now(), "operator": operator,
                    "kvgate_version": __version__, "git_commit": _git_commit(),
                    "host": socket.gethostname(), "inventory": inv, "profile": prof,
                }
                durable.write_atomic(meta_path, json.dumps(meta, indent=2, sort_keys=True) + "\n")
                resumed = False
            _remove_stale_temporaries(path)
            durable.append_jsonl(path / "runs.jsonl", {"started_at": _now(), "pid": os.getpid(),
                                                       "operator": operator, "resumed": resumed,
                                                       "kvgate_version": __version__})
        except BaseException:
            os.close(lock_fd)
            raise
        return cls(path, name, meta, lock_fd, resumed)

    @classmethod
    def read(cls, root: Path, name: str) -> Campaign:
        """Open an existing campaign read-only (no lock): for reports and ``kvgate show``."""
        path = Path(root) / name
        meta_path = path / "campaign.json"
        if not meta_path.exists():
            raise CampaignError(f"no campaign {name!r} under {root} (no {meta_path})")
        return cls(path, name, cls._read_meta(meta_path), None, True)

    @staticmethod
    def _read_meta(meta_path: Path) -> dict[str, Any]:
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CampaignError(f"{meta_path}: unreadable campaign file: {exc}") from None
        if not isinstance(meta, dict) or meta.get("format") != CAMPAIGN_FORMAT:
            fmt = meta.get("format") if isinstance(meta, dict) else None
            raise CampaignError(f"{meta_path}: unknown campaign format {fmt!r}")
        return meta

    @staticmethod
    def _lock(path: Path) -> int:
        lock_path = path / ".lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = ""
            try:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
            except OSError:
                pass
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise CampaignLocked(
                    f"campaign {path.name} is being written by another kvgate run "
                    f"({holder or 'pid unknown'}); wait for it or stop it (lock file {lock_path})") from None
            raise CampaignError(f"cannot lock {lock_path}: {exc.strerror or exc}") from None
        info = f"pid {os.getpid()} on {socket.gethostname()} since {_now()}\n".encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, info, 0)
        return fd

    # -- use ------------------------------------------------------------------------------------
    @property
    def id(self) -> str:
        """This campaign's id: what marks the node directories it creates (only those are deleted)."""
        return str(self.meta.get("id") or f"{self.name}@{self.meta.get('started_at', '')}")

    @property
    def writable(self) -> bool:
        return self._lock_fd is not None

    def gate_dir(self, gate: str) -> GateDir:
        if not _GATE.match(gate):
            raise CampaignError(f"gate {gate!r} is not a gate id such as G1")
        return GateDir(self.path / gate, gate, create=self.writable)

    def load_result(self, gate: str) -> GateResult:
        return load_result(self.path / gate / "result.json")

    def close(self) -> None:
        if self._lock_fd is not None:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = None

    def __enter__(self) -> Campaign:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_lock_fd", None) is not None:
            self.close()
