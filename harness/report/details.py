"""A reason cell is a sentence a signer reads; the protocol details a pipeline records in the same
text (rounds and their figures, paths, tunables, tool settings, evidence file names) go to the
report's appendix "Details of the checks", one row per clause, linked from the cell (issue 53
item 2). A recorded text is clauses joined by ``"; "`` (``harness.report.phrases``); a clause is a
detail when it holds one of ``_DETAIL``'s marks, and it is moved whole, never cut."""

from __future__ import annotations

import re
from collections.abc import Sequence

from harness.gates import messages as M
from harness.gates.outcome import Message
from harness.report.phrases import clauses

_DETAIL = re.compile(
    r"(?<![\w.])/[\w.+-]+/"        # an absolute path (/var/tmp/kvgate/...)
    r"|\b\w+(?:\.\w+)+=\S"         # a dotted tunable (glibc.malloc.hugetlb=1)
    r"|\brounds?\b"                # a probe's rounds and their figures
    r"|\(evidence "                # an evidence file named inside a sentence
    r"|^backing "                  # the block-device chain behind a path
    r"|\bO_DIRECT\b|\bengine io_uring\b|\bengine libaio\b|\bfio-\d"  # the probe's tool settings
    r"|\bDirty\+Writeback\b|\bsync -f\b")


def is_detail(clause: str) -> bool:
    return bool(_DETAIL.search(clause))


def split_text(text: str) -> tuple[str, list[str]]:
    """``text``'s clauses a signer reads (joined again) and its detail clauses, in order."""
    parts = clauses(text)
    return "; ".join(c for c in parts if not is_detail(c)), [c for c in parts if is_detail(c)]


def split_messages(msgs: Sequence[Message]) -> tuple[list[Message], list[str]]:
    """The same for recorded messages: a ``%(text)s`` message (words a pipeline recorded) is split;
    a catalog sentence is kept whole (it carries no protocol detail)."""
    kept: list[Message] = []
    details: list[str] = []
    for m in msgs:
        text = m.params.get("text") if m.id == M.TEXT else None
        if not isinstance(text, str):
            kept.append(m)
            continue
        rest, found = split_text(text)
        details += found
        if rest:
            kept.append(Message(id=M.TEXT, params={"text": rest}))
    return kept, details
