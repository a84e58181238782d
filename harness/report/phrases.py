"""Texts the pipelines record as data (an observation's ``%(text)s`` parameter, the measured and
reason strings of results written before the gate engine recorded catalog messages) said in the
report's language.

A recorded text is a list of clauses joined by ``"; "``. Each clause is looked up as a catalog
message as it is, then matched against ``PATTERNS``: an English sentence with its numbers and ids
as named groups, whose catalog message (marked ``N_``, so ``make i18n`` extracts it) is composed
with the groups (a group named in ``nested`` is itself a clause). A pattern is used only when its
English message composed with the captured groups gives the clause back exactly, so a report in
English prints what was recorded, byte for byte; a clause no pattern knows stays as recorded.
New pipeline wording belongs in a catalog message (``harness.gates.messages``); this table covers
the wording pipelines record today and results already on disk.
"""

# ruff: noqa: E501 - a table of sentences reads better one pattern to a line
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from harness.report.i18n import N_

_NUM = r"[-+]?[\d.,]+%?"


@dataclass(frozen=True)
class _Pattern:
    rx: re.Pattern[str]
    msgid: str
    nested: tuple[str, ...] = ()


def _p(rx: str, msgid: str, *nested: str) -> _Pattern:
    return _Pattern(re.compile(rx), msgid, nested)


# Whole clauses (no parameter): marked so the extractor puts them in the catalog.
SENTENCES = (
    N_("point estimate, no confidence interval"),
    N_("a hit beyond what measured requests share means the prompt was not evicted"),
    N_("measured far slower than predicted: the tier delivered less than its fio bandwidth (small reads, "
       "no parallelism, a busy device) or the context was partly recomputed"),
    N_("every sampled output identical"),
    N_("no failure"),
    N_("no NVMe drive is known behind the KV target (inventory device/raid_members)"),
    N_("no md array is known behind the KV target (inventory raid/device)"),
    N_("the engine process kept its identity (pid and start time)"),
    N_("the inventory names no NVMe drive behind the candidate's target"),
    N_("the inventory states no RAID behind the candidate's target"),
    N_("storage (NVMe, blk, md, filesystem)"),
    N_("network (mlx5/RoCE link, NIC health)"),
    N_("accelerator (Xid, GPU reset, NPU; kernel log only)"),
    N_("output throughput"),
    N_("the engine's HBM prefix cache is not sized by the profile"),
    N_("steady state reached (range and slope within bounds)"),
    N_("requests that took any chunk from a memory tier (emulator)"),
    N_("every output identical"),
    N_("it carries no signature"),
    N_("cluster-t-log-p50 (per-repetition log medians; baseline variance floored at the candidate's)"),
    # check descriptions of earlier shipped gate files, as results recorded them (the current
    # files' words are extracted from gates/*.yaml)
    N_("Output throughput gain at each arm's highest swept concurrency whose every repetition meets the profile's "
       "load.slo (TTFT p90, inter-token latency p90), when the profile sets one"),
)

PATTERNS = (
    _p(r"(?P<value>.+) \(point estimate\)", N_("%(value)s (point estimate)"), "value"),
    _p(rf"(?P<value>.+) \[(?P<low>{_NUM}), (?P<high>{_NUM})\] \((?P<confidence>\d+)% CI, (?P<size>[^)]+)\)",
       N_("%(value)s [%(low)s, %(high)s] (%(confidence)s%% CI, %(size)s)"), "value", "size"),
    _p(r"n=(?P<n>\d+)", N_("n=%(n)s")),
    _p(r"(?P<n>\d+) repetitions, (?P<requests>\d+) requests", N_("%(n)s repetitions, %(requests)s requests")),
    _p(r"(?P<n>\d+) runs, (?P<rounds>\d+) rounds", N_("%(n)s runs, %(rounds)s rounds")),
    _p(r"the (?P<confidence>\d+)% interval straddles the threshold (?P<threshold>\S+)",
       N_("the %(confidence)s%% interval straddles the threshold %(threshold)s")),
    _p(r"about (?P<n>\d+) samples per group would likely decide", N_("about %(n)s samples per group would likely decide")),
    _p(r"(?P<n>\d+) tokens \(lowest repetition\)", N_("%(n)s tokens (lowest repetition)")),
    _p(r"(?P<share>\S+) identical over the first (?P<n>\d+) tokens \(lowest repetition\)",
       N_("%(share)s identical over the first %(n)s tokens (lowest repetition)")),
    _p(r"(?P<hits>\d+) engine prefix-cache hit tokens, (?P<shared>\d+) shared among measured requests",
       N_("%(hits)s engine prefix-cache hit tokens, %(shared)s shared among measured requests")),
    _p(r"(?P<share>\S+) of prompt tokens from the offload tiers, expected (?P<expected>\S+)",
       N_("%(share)s of prompt tokens from the offload tiers, expected %(expected)s")),
    _p(r"(?P<point>c\d+): (?P<a>[\d.]+) -> (?P<b>[\d.]+) tok/s", N_("%(point)s: %(a)s -> %(b)s tok/s")),
    _p(r"predicted (?P<p>[\d.]+ \S+), measured (?P<m>[\d.]+ \S+)", N_("predicted %(p)s, measured %(m)s")),
    _p(r"(?P<k>\d+) of (?P<n>\d+) identical", N_("%(k)s of %(n)s identical")),
    _p(r"(?P<n>\d+) greedy answers identical", N_("%(n)s greedy answers identical")),
    _p(r"(?P<arm>baseline|recompute) p50 (?P<a>[\d.]+ ms) \(n=(?P<na>\d+)\), candidate p50 (?P<b>[\d.]+ ms)"
       r"(?: \(n=(?P<nb>\d+)\))?", N_("%(arm)s p50 %(a)s (n=%(na)s), candidate p50 %(b)s (n=%(nb)s)")),
    _p(r"(?P<arm>baseline|recompute) p50 (?P<a>[\d.]+ ms) \(n=(?P<na>\d+)\), candidate p50 (?P<b>[\d.]+ ms)",
       N_("%(arm)s p50 %(a)s (n=%(na)s), candidate p50 %(b)s")),
    _p(r"best point (?P<point>c\d+) \(highest candidate throughput\)",
       N_("best point %(point)s (highest candidate throughput)")),
    _p(r"per-repetition output throughput baseline (?P<values>[\d., ]+)",
       N_("per-repetition output throughput baseline %(values)s")),
    _p(r"candidate (?P<values>[\d., ]+)", N_("candidate %(values)s")),
    _p(r"fio (?P<job>\S+) read on (?P<target>\S+), engine (?P<engine>\S+), (?P<direct>O_DIRECT|direct=\d), "
       r"(?P<version>\S+)", N_("fio %(job)s read on %(target)s, engine %(engine)s, %(direct)s, %(version)s")),
    _p(r"fio (?P<job>\S+) write on (?P<target>\S+), engine (?P<engine>\S+), (?P<direct>O_DIRECT|direct=\d), "
       r"(?P<version>\S+)", N_("fio %(job)s write on %(target)s, engine %(engine)s, %(direct)s, %(version)s")),
    _p(r"fio sequential read (?P<bw>\S+ \S+) against the declared read rate (?P<rate>\S+ \S+) \(enforced by "
       r"(?P<enforce>\S+)\)", N_("fio sequential read %(bw)s against the declared read rate %(rate)s (enforced by "
                                 "%(enforce)s)")),
    _p(r"fio sequential read (?P<bw>\S+ \S+) against the declared read rate (?P<rate>\S+ \S+) \(not enforced by "
       r"kvgate\)", N_("fio sequential read %(bw)s against the declared read rate %(rate)s (not enforced by kvgate)")),
    _p(r"(?P<target>[\w.-]+): reads and writes provisioned at (?P<rate>\S+ \S+) by (?P<enforce>\S+)",
       N_("%(target)s: reads and writes provisioned at %(rate)s by %(enforce)s")),
    _p(r"(?P<target>[\w.-]+): reads provisioned at (?P<rate>\S+ \S+) by (?P<enforce>\S+)",
       N_("%(target)s: reads provisioned at %(rate)s by %(enforce)s")),
    _p(r"(?P<target>[\w.-]+): writes provisioned at (?P<rate>\S+ \S+) by (?P<enforce>\S+)",
       N_("%(target)s: writes provisioned at %(rate)s by %(enforce)s")),
    _p(r"(?P<target>[\w.-]+): reads provisioned at (?P<read>\S+ \S+), writes provisioned at (?P<write>\S+ \S+) by "
       r"(?P<enforce>\S+)", N_("%(target)s: reads provisioned at %(read)s, writes provisioned at %(write)s by %(enforce)s")),
    _p(r"(?P<label>.+) \(cgroup (?P<cgroup>\S+), devices (?P<devices>[^()]+)\)",
       N_("%(label)s (cgroup %(cgroup)s, devices %(devices)s)"), "label"),
    _p(r"expected (?P<path>\S+) to exist and be writable", N_("expected %(path)s to exist and be writable")),
    _p(r"the baseline arm '(?P<arm>[^']+)' has no storage target \(no KV offload\)",
       N_("the baseline arm '%(arm)s' has no storage target (no KV offload)")),
    _p(r"the baseline arm '(?P<arm>[^']+)' has no storage target \(CPU or remote tier\)",
       N_("the baseline arm '%(arm)s' has no storage target (CPU or remote tier)")),
    _p(r"the baseline arm '(?P<arm>[^']+)' offloads no KV \(offload: false\)",
       N_("the baseline arm '%(arm)s' offloads no KV (offload: false)")),
    _p(r"median of the last (?P<n>\d+) of (?P<m>\d+) rounds of (?P<s>\S+ s) \((?P<values>[^()]+)\)",
       N_("median of the last %(n)s of %(m)s rounds of %(s)s (%(values)s)")),
    _p(r"preconditioned: one sequential direct write pass over the (?P<size>\S+ \S+) working set in (?P<s>\S+ s) "
       r"\(evidence (?P<file>\S+)\)", N_("preconditioned: one sequential direct write pass over the %(size)s working "
                                        "set in %(s)s (evidence %(file)s)")),
    _p(r"writes drained after (?P<s>\S+ s) \((?P<how>.+)\)", N_("writes drained after %(s)s (%(how)s)")),
    _p(r"no cache_size declared for target (?P<target>\S+): the figure may include cache \(working set (?P<size>\S+ \S+)\)",
       N_("no cache_size declared for target %(target)s: the figure may include cache (working set %(size)s)")),
    _p(r"(?P<k>\d+) of (?P<n>\d+) differ in the first (?P<t>\d+) tokens", N_("%(k)s of %(n)s differ in the first %(t)s tokens")),
    _p(r"each arm at its own best point, chosen from (?P<a>\d+) candidate and (?P<b>\d+) baseline concurrencies "
       r"\(the interval pays for the choice\)", N_("each arm at its own best point, chosen from %(a)s candidate and "
                                                 "%(b)s baseline concurrencies (the interval pays for the choice)")),
    _p(r"(?P<n>\d+) measured request\(s\) served from a host-memory tier \(most in any repetition\)",
       N_("%(n)s measured request(s) served from a host-memory tier (most in any repetition)")),
    _p(r"per repetition: (?P<values>[\d., ]+)", N_("per repetition: %(values)s")),
    _p(r"implied restore (?P<bw>\S+ \S+) \(restored KV per request / TTFT p50\) vs the tier's own files read at "
       r"(?P<range>\S+ \S+)", N_("implied restore %(bw)s (restored KV per request / TTFT p50) vs the tier's own files "
                                 "read at %(range)s")),
    _p(r"(?P<b>\d+) B/token \(the emulator's geometry x kv_scale (?P<scale>\S+)\)",
       N_("%(b)s B/token (the emulator's geometry x kv_scale %(scale)s)")),
    _p(r"per repetition implied/storage upper: (?P<values>[\d., ]+)", N_("per repetition implied/storage upper: %(values)s")),
    _p(r"best point (?P<point>c\d+) \(highest candidate throughput\), the baseline at the same concurrency",
       N_("best point %(point)s (highest candidate throughput), the baseline at the same concurrency")),
    _p(r"(?P<n>\d+) requests over (?P<r>\d+) repetitions", N_("%(n)s requests over %(r)s repetitions")),
    _p(r"unsigned baseline \(--allow-unsigned-baseline\): (?P<why>.+)", N_("unsigned baseline (--allow-unsigned-baseline): %(why)s"),
       "why"),
    _p(r"UNSIGNED BASELINE: the (?P<gate>\S+) baseline of campaign '(?P<campaign>[^']+)' was not verified \((?P<why>.+)\); "
       r"accepted with --allow-unsigned-baseline", N_("UNSIGNED BASELINE: the %(gate)s baseline of campaign '%(campaign)s' "
                                                    "was not verified (%(why)s); accepted with --allow-unsigned-baseline"),
       "why"),
    _p(r"backing (?P<path>\S+) \((?P<fs>\S+)\) -> (?P<dev>\S+) \((?P<kind>\S+)\)", N_("backing %(path)s (%(fs)s) -> %(dev)s (%(kind)s)")),
    _p(r"I/O buffers on transparent huge pages \((?P<how>\S+), THP (?P<mode>\S+), glibc (?P<libc>\S+)\)",
       N_("I/O buffers on transparent huge pages (%(how)s, THP %(mode)s, glibc %(libc)s)")),
    _p(r"I/O buffers on 4 KiB pages \(THP (?P<mode>\S+), glibc (?P<libc>\S+): huge pages not granted\), so figures of "
       r"separate fio runs may differ by where their buffers land",
       N_("I/O buffers on 4 KiB pages (THP %(mode)s, glibc %(libc)s: huge pages not granted), so figures of separate "
          "fio runs may differ by where their buffers land")),
    _p(r"I/O buffers not recorded", N_("I/O buffers not recorded")),
    _p(r"steady state NOT reached \(range (?P<range>\S+) of the mean exceeds (?P<limit>\S+)\)",
       N_("steady state NOT reached (range %(range)s of the mean exceeds %(limit)s)")),
    _p(r"errors (?P<n>\d+)", N_("errors %(n)s")),
    _p(r"measured/expected per repetition: (?P<values>[\d., ]+)", N_("measured/expected per repetition: %(values)s")),
    _p(r"offload-tier hit tokens per repetition: (?P<values>[\d., ]+)",
       N_("offload-tier hit tokens per repetition: %(values)s")),
    _p(r"populate pass, mean over (?P<a>\d+) and (?P<b>\d+) repetitions",
       N_("populate pass, mean over %(a)s and %(b)s repetitions")),
    _p(r"reference arm '(?P<arm>[^']+)'", N_("reference arm '%(arm)s'")),
    _p(r"reference: arm '(?P<arm>[^']+)'", N_("reference: arm '%(arm)s'")),
    _p(r"sample of (?P<n>\d+) per repetition", N_("sample of %(n)s per repetition")),
    _p(r"(?P<a>\S+ s) -> (?P<b>\S+ s)", N_("%(a)s -> %(b)s")),
    _p(r"(?P<k>\d+) of (?P<n>\d+)", N_("%(k)s of %(n)s")),
    _p(r"(?P<n>\d+) line\(s\)", N_("%(n)s line(s)")),
    _p(r"(?P<value>\S+) \(median of first (?P<a>\d+) windows (?P<x>\S+), last (?P<b>\d+) (?P<y>\S+)\)",
       N_("%(value)s (median of first %(a)s windows %(x)s, last %(b)s %(y)s)")),
    _p(r"(?P<value>\S+) \(mean of first (?P<a>\d+) windows (?P<x>\S+), last (?P<b>\d+) (?P<y>\S+)\)",
       N_("%(value)s (mean of first %(a)s windows %(x)s, last %(b)s %(y)s)")),
    _p(r"(?P<value>\S+) \(mean of (?P<k>\d+) batch medians: first (?P<a>\d+) windows (?P<x>\S+), last (?P<b>\d+) "
       r"(?P<y>\S+)\)",
       N_("%(value)s (mean of %(k)s batch medians: first %(a)s windows %(x)s, last %(b)s %(y)s)")),
    _p(r"(?P<value>\S+) \(mean of (?P<k>\d+) batch means: first (?P<a>\d+) windows (?P<x>\S+), last (?P<b>\d+) "
       r"(?P<y>\S+)\)",
       N_("%(value)s (mean of %(k)s batch means: first %(a)s windows %(x)s, last %(b)s %(y)s)")),
    _p(r"(?P<value>\S+) \((?P<level>\S+) of (?P<n>\S+) requests in flight\)",
       N_("%(value)s (%(level)s of %(n)s requests in flight)")),
    _p(r"(?P<metric>TTFT p50|output throughput): first (?P<a>\d+) vs last (?P<b>\d+) of (?P<n>\d+) full windows "
       r"after the (?P<warm>\S+) s warm-up \((?P<out>\d+) window\(s\) left out\)",
       N_("%(metric)s: first %(a)s vs last %(b)s of %(n)s full windows after the %(warm)s s warm-up "
          "(%(out)s window(s) left out)"), "metric"),
    _p(r"resampled in blocks of (?P<n>\d+) consecutive window\(s\)", N_("resampled in blocks of %(n)s consecutive window(s)")),
    _p(r"each third cut into (?P<n>\d+) batch\(es\) of consecutive windows",
       N_("each third cut into %(n)s batch(es) of consecutive windows")),
    _p(r"closed loop over (?P<n>\d+) full windows after the (?P<warm>\S+) s warm-up \((?P<out>\d+) window\(s\) left out\)",
       N_("closed loop over %(n)s full windows after the %(warm)s s warm-up (%(out)s window(s) left out)")),
    _p(r"lowest window (?P<level>\S+) in flight", N_("lowest window %(level)s in flight")),
    _p(r"ended: (?P<how>duration|stopped)", N_("ended: %(how)s")),
    _p(r"(?P<n>\d+) windows", N_("%(n)s windows")),
    _p(r"profile duration (?P<s>\S+ s)", N_("profile duration %(s)s")),
    _p(r"fio read (?P<after>\S+ \S+) after / (?P<before>\S+ \S+) before \(same job set, target and protocol\)",
       N_("fio read %(after)s after / %(before)s before (same job set, target and protocol)")),
    _p(r"(?P<kind>.+) lines in the kernel log during the soak", N_("%(kind)s lines in the kernel log during the soak"),
       "kind"),
    _p(r"emulator HBM: (?P<n>\d+) tokens in whole (?P<cs>\d+)-token chunks",
       N_("emulator HBM: %(n)s tokens in whole %(cs)s-token chunks")),
    _p(r"(?P<b>\d+) B per (?P<cs>\d+)-token chunk file \(kv_scale (?P<scale>\S+)\)",
       N_("%(b)s B per %(cs)s-token chunk file (kv_scale %(scale)s)")),
    _p(r"(?P<b>\d+) B per token per TP rank \((?P<tp>\d+) ranks\)", N_("%(b)s B per token per TP rank (%(tp)s ranks)")),
    _p(r"(?P<key>max_local_disk_size) 0: unbounded", N_("%(key)s 0: unbounded")),
    _p(r"(?P<path>[a-z][\w-]*(?:\.[\w*-]+)+): (?P<rest>.+)", N_("%(path)s: %(rest)s"), "rest"),
)


def _clause(text: str, gettext: Callable[[str], str]) -> str:
    if not text.strip():
        return text  # gettext("") is the catalog's header
    said = gettext(text)
    if said != text:
        return said
    for pat in PATTERNS:
        m = pat.rx.fullmatch(text)
        if m is None:
            continue
        groups = {k: v or "" for k, v in m.groupdict().items()}
        if pat.msgid % groups != text:  # the English message must give the clause back exactly
            continue
        return gettext(pat.msgid) % {k: say(v, gettext) if k in pat.nested else v for k, v in groups.items()}
    return text


def say(text: str, gettext: Callable[[str], str]) -> str:
    """``text`` (clauses joined by ``"; "``) in the language of ``gettext``; unknown clauses as
    recorded. The whole text is tried first (a clause may itself hold ``"; "``)."""
    whole = _clause(text, gettext)
    if whole != text or "; " not in text:
        return whole
    return "; ".join(_clause(part, gettext) for part in clauses(text))


def clauses(text: str) -> list[str]:
    """``text`` split at each ``"; "`` outside parentheses."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and text.startswith("; ", i):
            out.append(text[start:i])
            start = i + 2
    return out + [text[start:]]
