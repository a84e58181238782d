"""The campaign's own manifest (``reports/<campaign>/campaign.manifest``): which gates the
campaign has, each bound by the sha256 of its ``MANIFEST.sha256``, with its verdict and the
campaign's name. Without it a campaign could lose its failing gate (delete ``G3/``, or put a
FIFO where its ``result.json`` was) and still verify.

The file is ``sha256sum`` format with ``#`` lines, which ``sha256sum -c`` skips, so a customer
checks it with coreutils in the campaign directory::

    # kvgate-campaign-manifest-v1
    # campaign camp-1
    # gate G1 PASS
    3f2a...  G1/MANIFEST.sha256
    # gate G3 FAIL
    9c1e...  G3/MANIFEST.sha256
    # journal
    5d07...  journal.jsonl

The last line binds the campaign's journal of gate runs (``harness.store.journal``): records
removed or rewritten after the set was signed show as a changed ``journal.jsonl``.

It is signed like a gate's manifest (SSHSIG, namespace ``kvgate-report@v1``,
``signatures/<role>-<signer-id>.sig`` in the campaign directory), and the campaign page (so its
PDF) names its sha256. It is rewritten whenever a gate finishes, a gate is signed or the
campaign page is rendered, except once it carries a signature: a signed set is never rewritten,
so a gate added, removed or replaced afterwards shows in ``kvgate verify``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from harness.report.loader import RESULT_FILE, ResultFileError, load_gate_result
from harness.report.manifest import MANIFEST, SIGNATURES, ManifestError, read_regular
from harness.store.durable import write_atomic
from harness.store.journal import JOURNAL

log = logging.getLogger(__name__)

CAMPAIGN_MANIFEST = "campaign.manifest"
FORMAT = "kvgate-campaign-manifest-v1"
KEYWORD = "kvgate-campaign-manifest-sha256:"  # how the campaign page (and its PDF) names the digest
_GATE_DIR = re.compile(r"^[A-Za-z]*\d+$")
_SHA_LINE = re.compile(r"^([0-9a-f]{64})  (\S+)/" + re.escape(MANIFEST) + "$")
_JOURNAL_LINE = re.compile(r"^([0-9a-f]{64})  " + re.escape(JOURNAL) + "$")

__all__ = ["CAMPAIGN_MANIFEST", "KEYWORD", "GateEntry", "campaign_manifest_sha256", "campaign_signatures",
           "expected_entries", "journal_sha256", "parse", "recorded_journal", "text", "write_campaign_manifest"]


@dataclass(frozen=True)
class GateEntry:
    gate: str  # the gate directory's name
    verdict: str
    manifest_sha256: str  # "" when the gate has no MANIFEST.sha256


@dataclass
class Scan:
    entries: list[GateEntry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # result.json that is not a regular file, ...
    campaigns: dict[str, str] = field(default_factory=dict)  # gate dir -> result.campaign


def _sha(path: Path) -> str:
    try:
        return hashlib.sha256(read_regular(path)).hexdigest()
    except (OSError, ManifestError):
        return ""


def expected_entries(campaign_dir: Path) -> Scan:
    """The gates present now, by lstat: a subdirectory with an entry named ``result.json``. One
    that is not a regular file (a FIFO, a symlink) is a problem, never a silently missing gate."""
    out = Scan()
    for entry in sorted(os.scandir(campaign_dir), key=lambda e: e.name):
        if not entry.is_dir(follow_symlinks=False) or entry.name == SIGNATURES:
            continue
        res = Path(entry.path) / RESULT_FILE
        try:
            mode = os.lstat(res).st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(mode):
            out.problems.append(f"{entry.name}/{RESULT_FILE} is not a regular file: the gate cannot be read")
            continue
        try:
            result = load_gate_result(Path(entry.path))
        except ResultFileError as exc:
            out.problems.append(f"{entry.name}/{RESULT_FILE} unreadable: {exc}")
            continue
        out.campaigns[entry.name] = result.campaign
        out.entries.append(GateEntry(entry.name, result.verdict.value, _sha(Path(entry.path) / MANIFEST)))
    return out


def journal_sha256(campaign_dir: Path) -> str:
    """sha256 of the campaign's ``journal.jsonl`` ("" when there is none)."""
    return _sha(Path(campaign_dir) / JOURNAL)


def text(name: str, entries: list[GateEntry], journal: str = "") -> str:
    lines = [f"# {FORMAT}", f"# campaign {name}"]
    for e in entries:
        lines.append(f"# gate {e.gate} {e.verdict}")
        if e.manifest_sha256:
            lines.append(f"{e.manifest_sha256}  {e.gate}/{MANIFEST}")
    if journal:
        lines += ["# journal", f"{journal}  {JOURNAL}"]
    return "\n".join(lines) + "\n"


def recorded_journal(content: str) -> str:
    """The journal sha256 a campaign manifest's text binds ("" when it binds none)."""
    for line in content.splitlines():
        if m := _JOURNAL_LINE.match(line):
            return m.group(1)
    return ""


def parse(content: str) -> tuple[Optional[str], dict[str, GateEntry], list[str]]:
    """(campaign name, entries by gate, problems) of a campaign manifest's text."""
    name: Optional[str] = None
    verdicts: dict[str, str] = {}
    shas: dict[str, str] = {}
    problems: list[str] = []
    lines = content.splitlines()
    if not lines or lines[0] != f"# {FORMAT}":
        problems.append(f"{CAMPAIGN_MANIFEST}: not a {FORMAT} file")
    for n, line in enumerate(lines[1:], 2):
        parts = line.split(" ")
        if line.startswith("# campaign ") and len(parts) == 3:
            name = parts[2]
        elif line.startswith("# gate ") and len(parts) == 4:
            verdicts[parts[2]] = parts[3]
        elif m := _SHA_LINE.match(line):
            shas[m.group(2)] = m.group(1)
        elif line == "# journal" or _JOURNAL_LINE.match(line):
            continue  # recorded_journal reads it
        else:
            problems.append(f"{CAMPAIGN_MANIFEST} line {n}: not understood")
    entries = {g: GateEntry(g, v, shas.pop(g, "")) for g, v in verdicts.items()}
    problems += [f"{CAMPAIGN_MANIFEST}: {g} has a digest but no gate line" for g in shas]
    return name, entries, problems


def campaign_signatures(campaign_dir: Path) -> list[str]:
    sigs = Path(campaign_dir) / SIGNATURES
    if not sigs.is_dir() or sigs.is_symlink():
        return []
    return sorted(f"{SIGNATURES}/{p.name}" for p in sigs.iterdir() if p.name.endswith(".sig"))


def campaign_manifest_sha256(campaign_dir: Path) -> str:
    """sha256 of ``campaign.manifest`` ("" when there is none)."""
    return _sha(Path(campaign_dir) / CAMPAIGN_MANIFEST)


def write_campaign_manifest(campaign_dir: Path) -> Optional[Path]:
    """Write the manifest of the gates present now; a signed one is left as it is (returns None
    then, and when nothing changed the file is not rewritten)."""
    campaign_dir = Path(campaign_dir)
    path = campaign_dir / CAMPAIGN_MANIFEST
    new = text(campaign_dir.name, expected_entries(campaign_dir).entries, journal_sha256(campaign_dir)).encode("utf-8")
    old = read_regular(path) if path.is_file() and not path.is_symlink() else None
    if old == new:
        return path
    if old is not None and campaign_signatures(campaign_dir):
        log.warning("%s is signed: left as it is (the gates changed since; kvgate verify names how)", path)
        return None
    write_atomic(path, new)
    return path
