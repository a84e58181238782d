"""G4's measured results from what a soak left on disk: the window index, the watchdog's events,
the node health samples, the probe set's answers and fio before/after. Pure functions of local
files and numbers (no node, no clock), so ``kvgate soak status``, the gate and ``bench/soak.py``
compute the same figures.

Every figure is ``None`` (NOT_RUN, with the reason in ``detail``) when the data it needs is
missing: no window, no readable kernel log after the baseline sample, no SMART answer, no probe
answers, no fio on either side. Nothing missing is ever counted as zero.

Duration: the time under load, the sum of the windows' lengths with each window counted at most
its configured length plus the agent's slack: a window that lasted far longer (a stalled agent, a
suspended VM, a clock step) is named, not counted as load.

Warm-up: the profile's ``soak.warmup`` (seconds of load from the first window's start) is left
out of drift and trend: a window that started inside it is not compared (caches and the KV tier
fill up then; a real soak has the same start-up). Its windows still count for the duration, the
failed ratio, restarts and every error count.

Drift: the first and the last ``N`` full windows after the warm-up (``N`` = a third of them, at
least one), each third cut into ``DRIFT_BATCHES`` batches of consecutive windows and compared by
the mean of its batches' figures: each batch's median of per-window TTFT p50 (``last / first - 1``:
positive = slower) and mean throughput (``1 - last / first``: positive = lower). The samples are
the per-window figures, and the gate's interval is built on the batches' figures (batch means,
``harness.gates.stats``), because a shared disk or a neighbour's load wanders over tens of windows
and windows resampled as if independent, or in blocks sized for a lag-1 memory, give too narrow an
interval. A window shorter than half the configured window (the soak's last, cut short) is left
out of drift. The trend is a least-squares slope of TTFT p50 over time (ms per hour) with a
moving-block bootstrap interval over windows; it is reported, not checked.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from harness.facts.parsers.common import FactsParseError
from harness.facts.parsers.health import (
    GpuEcc,
    ecc_increases,
    kernel_faults,
    npu_unhealthy,
    parse_amdsmi_ecc,
    parse_mdstat,
    parse_smart_log,
)
from harness.gates.stats import MIN_INTERVAL_SAMPLES, batch_values, block_length, block_resample_indices, percentile
from harness.load.soak import DONE, EVENTS, HEALTH, WINDOWS_INDEX
from harness.pipelines.g4.soakrun import read_local_json, read_local_jsonl
from harness.pipelines.shared.sweepdata import _m
from harness.units import UnitKind, format_quantity

FULL_BYTES = 1 << 20  # less free space than this on the KV target: full
# Batches of consecutive windows a third of the soak is cut into for the drift checks' interval
# (harness.gates.stats, batch means): the gate's minimum of independent figures per side. More
# batches are shorter, and batches shorter than the wander's memory make the interval too narrow.
DRIFT_BATCHES = MIN_INTERVAL_SAMPLES


def window_cap(window_s: float) -> float:
    """The most one window counts for the duration: its configured length plus the agent's
    scheduling slack (5%, at least a second)."""
    return window_s + max(1.0, 0.05 * window_s)


def time_under_load(windows: Sequence[dict[str, Any]], window_s: float) -> tuple[float, list[str]]:
    """Seconds under load: the windows' lengths, each at most :func:`window_cap`, and the windows
    that were longer. The wall time from the first start to the last end would count a stalled
    agent (a frozen process, a suspended VM) or a clock step as hours of load; a gap between
    windows counts for nothing."""
    cap = window_cap(window_s)
    total, stalled = 0.0, []
    for w in windows:
        length = float(w.get("length_s") or 0.0)
        if length > cap:
            stalled.append(f"window {w.get('index')} ({length:.0f} s)")
        total += min(length, cap)
    return total, stalled


def full_windows(windows: Sequence[dict[str, Any]], window_s: float) -> list[dict[str, Any]]:
    return [w for w in windows if float(w.get("length_s") or 0.0) >= 0.5 * window_s]


def after_warmup(windows: Sequence[dict[str, Any]], warmup_s: float,
                 start_unix: Optional[float] = None) -> list[dict[str, Any]]:
    """The windows that started at or after ``start_unix + warmup_s`` (default start: the first
    window's start). A small tolerance keeps a window that opens on the boundary itself."""
    if warmup_s <= 0 or not windows:
        return list(windows)
    t0 = float(windows[0]["started_unix"]) if start_unix is None else start_unix
    return [w for w in windows if float(w["started_unix"]) - t0 >= warmup_s - 0.05]


def _drift_groups(values: list[Any]) -> tuple[list[Any], list[Any]]:
    n = max(1, len(values) // 3)
    return values[:n], values[-n:]


def drift_leaf(windows: Sequence[dict[str, Any]], key: str, transform: str, what: str,
               warmup_note: str = "", *, stat: str = "median") -> dict[str, Any]:
    """Drift of ``key`` between the first and the last third of ``windows`` (full windows after
    the warm-up, in order), each third cut into ``DRIFT_BATCHES`` batches of consecutive windows
    and summed up as the mean of its batches' ``stat``: the median of the windows' TTFT p50s, the
    mean of their throughputs (the tokens the third served over its time; a median of
    throughputs ignores any minority of stalled windows, and whole requests per window put it on
    a few levels a resample never leaves). A window of either group without the figure (no request
    completed in it) makes the drift NOT_RUN: leaving it out would compare other windows than the
    first and the last; so does a TTFT of 0 or any figure below 0, which no engine measures."""
    if len(windows) < 2:
        return _m(None, detail=f"{what}: {len(windows)} full window(s){warmup_note}; at least 2 are needed")
    first_w, last_w = _drift_groups(list(windows))
    empty = [str(w.get("index")) for w in list(first_w) + list(last_w) if w.get(key) is None]
    if empty:
        return _m(None, detail=f"{what}: no completed request in window(s) {', '.join(empty)} of the first or "
                  "last third, so the drift between them cannot be measured")
    first = [float(w[key]) for w in first_w]
    last = [float(w[key]) for w in last_w]
    # A latency (gain: last / first - 1) of 0 is no measurement, and it would read as a -100% drift,
    # a PASS; a throughput (reduction) of 0 is a stall, measured. Nothing is below 0.
    bad = [str(w.get("index")) for w, v in zip(list(first_w) + list(last_w), first + last)
           if v < 0 or (v == 0 and transform == "gain")]
    if bad:
        return _m(None, detail=f"{what}: window(s) {', '.join(bad)} of the first or last third have a figure of "
                  f"{'0 or less' if transform == 'gain' else 'less than 0'}, which is not a measurement")
    samples: dict[str, Any] = {"kind": "ratio", "a": last, "b": first, "stat": stat, "transform": transform}
    batches = min(DRIFT_BATCHES, len(first))
    if batches >= 2:
        samples["batches"] = batches
        samples["long_memory"] = True  # widened for the memory the windows show (harness.gates.stats)
    c_first, c_last = _centre(first, batches, stat), _centre(last, batches, stat)
    if c_first == 0:
        return _m(None, detail=f"{what}: the first windows' {stat} is zero")
    value = c_last / c_first - 1.0 if transform == "gain" else 1.0 - c_last / c_first
    of = f"mean of {batches} batch {stat}s" if batches >= 2 else stat
    text = f"{value * 100:+.1f}% ({of}: first {len(first)} windows {c_first:.4g}, last {len(last)} {c_last:.4g})"
    return _m(value, text, detail=f"{what}: first {len(first)} vs last {len(last)} of {len(windows)} full "
              f"windows{warmup_note}; each third cut into {batches} batch(es) of consecutive windows",
              evidence=[f"evidence/soak/{WINDOWS_INDEX}"], samples=samples)


def _centre(xs: list[float], batches: int, stat: str) -> float:
    """A third's figure as the gate estimates it: the mean of its batches' figures (batch means)."""
    if batches >= 2:
        return statistics.fmean(batch_values(xs, batches, stat))
    return statistics.fmean(xs) if stat == "mean" else percentile(xs, 50)


def load_level(windows: Sequence[dict[str, Any]], *, concurrency: Optional[int],
               request_rate: Optional[float], warmup_note: str = "") -> dict[str, Any]:
    """How much of the profile's soak level the load held over ``windows`` (full windows after the
    warm-up): closed loop, the mean requests in flight (the windows' end-to-end time over their
    length) / ``concurrency``; open loop, the requests sent per second / ``request_rate``. A soak
    that ran far below its level (a throttled client, workers stuck) proves nothing about 72 hours
    at that level, however clean its other figures."""
    if concurrency is None and request_rate is None:
        return _m(None, detail="the soak's configured level is not known here")
    if not windows:
        return _m(None, detail=f"no full window{warmup_note}")
    length = sum(float(w.get("length_s") or 0.0) for w in windows)
    if length <= 0:
        return _m(None, detail="the windows have no length")
    if request_rate is not None:
        sent = sum(int(w.get("requests") or 0) for w in windows)
        low = min(int(w.get("requests") or 0) / max(float(w.get("length_s") or 0.0), 1e-9) for w in windows)
        value = sent / length / request_rate
        return _m(value, f"{value * 100:.1f}% ({sent / length:.3g} of {request_rate:g} requests/s)",
                  detail=f"open loop over {len(windows)} full windows{warmup_note}; lowest window "
                  f"{low:.3g} requests/s", evidence=[f"evidence/soak/{WINDOWS_INDEX}"])
    assert concurrency is not None
    missing = [str(w.get("index")) for w in windows if w.get("mean_in_flight") is None]
    if missing:
        return _m(None, detail=f"window(s) {', '.join(missing[:5])} carry no requests-in-flight figure (an agent "
                  "older than this controller)")
    busy = sum(float(w["mean_in_flight"]) * float(w.get("length_s") or 0.0) for w in windows)
    low = min(float(w["mean_in_flight"]) for w in windows)
    value = busy / length / concurrency
    return _m(value, f"{value * 100:.1f}% ({busy / length:.3g} of {concurrency} requests in flight)",
              detail=f"closed loop over {len(windows)} full windows{warmup_note}; lowest window {low:.3g} in flight",
              evidence=[f"evidence/soak/{WINDOWS_INDEX}"])


def instance_drift(windows: Sequence[dict[str, Any]], instances: int, warmup_note: str = "") -> dict[str, Any]:
    """Per engine instance the profile declares (``"instance 0"`` ...), the TTFT p50 and throughput
    drift from that instance's own per-window figures (the window's ``instances``). Requests go
    round-robin, so in the pooled windows one instance's slowdown among ``k`` moves the median
    by far less: with 8 instances a 50% slower one can hide under a 10% threshold. An instance the
    windows do not list (an agent without per-instance figures, an instance that never answered)
    is NOT_RUN, never left out."""
    out: dict[str, Any] = {}
    for i in range(instances):
        key = str(i)
        if not windows or any(key not in (w.get("instances") or {}) for w in windows):
            why = f"instance {i}: the soak's windows carry no figures of this instance"
            out[f"instance {i}"] = {"ttft_p50": _m(None, detail=why), "throughput": _m(None, detail=why)}
            continue
        per = [{"index": w.get("index"), **w["instances"][key]} for w in windows]
        out[f"instance {i}"] = {
            "ttft_p50": drift_leaf(per, "ttft_p50_ms", "gain", f"instance {i} TTFT p50", warmup_note),
            "throughput": drift_leaf(per, "throughput_tok_s", "reduction", f"instance {i} output throughput",
                                     warmup_note, stat="mean")}
    return out


def trend(windows: Sequence[dict[str, Any]], key: str, *, resamples: int = 1000,
          seed: int = 0) -> Optional[dict[str, Any]]:
    """Least-squares slope of ``key`` per hour over the windows' mid-times, with a 95% bootstrap
    interval over windows (pairs resampled in blocks of consecutive windows, as the drift is)."""
    pts = [((float(w["started_unix"]) + float(w["ended_unix"])) / 2.0, float(w[key]))
           for w in windows if w.get(key) is not None]
    if len(pts) < 3:
        return None
    t0 = pts[0][0]
    xs = [(t - t0) / 3600.0 for t, _ in pts]
    ys = [y for _, y in pts]

    def slope(ix: Sequence[int]) -> Optional[float]:
        n = len(ix)
        mx = sum(xs[i] for i in ix) / n
        my = sum(ys[i] for i in ix) / n
        sxx = sum((xs[i] - mx) ** 2 for i in ix)
        if sxx == 0:
            return None
        return sum((xs[i] - mx) * (ys[i] - my) for i in ix) / sxx

    est = slope(range(len(pts)))
    if est is None:
        return None
    rng = random.Random(seed)
    block = block_length([ys], len(ys))
    reps = sorted(s for s in (slope(block_resample_indices(rng, len(pts), block)) for _ in range(resamples))
                  if s is not None)
    low, high = (percentile(reps, 2.5), percentile(reps, 97.5)) if reps else (None, None)
    return {"per_hour": est, "low": low, "high": high, "windows": len(pts)}


def _kernel(health: Sequence[dict[str, Any]], evidence: str) -> tuple[bool, dict[str, list[dict[str, Any]]]]:
    """(a kernel log was readable after the baseline, faults by kind with time, line and the
    ``evidence`` file the samples are kept in)."""
    readable = False
    baseline_seen = False
    faults: dict[str, list[dict[str, Any]]] = {"storage": [], "network": [], "accelerator": []}
    for s in health:
        k = s.get("kernel") or {}
        if "error" in k:
            continue
        if k.get("baseline"):
            baseline_seen = True
            continue
        if baseline_seen:
            readable = True
        for f in kernel_faults(list(k.get("new") or [])):
            faults[f.kind].append({"t": s.get("t"), "line": f.line, "source": k.get("source"), "evidence": evidence})
    return readable, faults


def _accel(health: Sequence[dict[str, Any]], tools: Sequence[str],
           evidence: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """(why each tool that was asked for cannot vouch for the soak, fault lines with their time)
    from the accelerator tools' samples. A tool vouches when it answered at two samples or more
    (the first is the baseline of amd-smi's counters). amd-smi: an uncorrectable or deferred ECC
    total that grew between two answers. npu-smi: a chip whose Health is not OK, once per change
    of the set of unhealthy chips (a chip unhealthy at the start counts: it is under load)."""
    unreadable: dict[str, str] = {}
    faults: list[dict[str, Any]] = []
    for tool in tools:
        answers = 0
        problems: list[str] = []
        prev_ecc: Optional[list[GpuEcc]] = None
        prev_bad: Optional[list[str]] = None
        for s in health:
            v = (s.get("accel") or {}).get(tool)
            if not isinstance(v, dict):
                continue
            if v.get("text") is None:
                problems.append(str(v.get("error")))
                continue
            try:
                if tool == "amd-smi":
                    ecc = parse_amdsmi_ecc(str(v["text"]))
                    lines = ecc_increases(prev_ecc, ecc) if prev_ecc is not None else []
                    prev_ecc = ecc
                else:
                    bad = npu_unhealthy(str(v["text"]))
                    lines = [ln for ln in bad if ln not in (prev_bad or [])]
                    prev_bad = bad
            except FactsParseError as exc:
                problems.append(str(exc))
                continue
            answers += 1
            faults += [{"t": s.get("t"), "line": ln, "source": tool, "evidence": evidence} for ln in lines]
        if answers < 2:
            unreadable[tool] = f"{tool} answered {answers} time(s)" + (f" ({problems[0]})" if problems else "")
    return unreadable, faults


def _smart(health: Sequence[dict[str, Any]], devices: Sequence[str], evidence: str) -> dict[str, Any]:
    if not devices:
        return _m(None, detail="no NVMe drive is known behind the KV target (inventory device/raid_members)")
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    problems: list[str] = []
    for s in health:
        for dev, v in (s.get("smart") or {}).items():
            if "json" not in v:
                problems.append(f"{dev}: {v.get('error')}")
                continue
            try:
                sl = parse_smart_log(str(v["json"]))
            except FactsParseError as exc:
                problems.append(f"{dev}: {exc}")
                continue
            first.setdefault(dev, sl.media_errors)
            last[dev] = sl.media_errors
    missing = [d for d in devices if d not in first]
    if missing:
        why = "; ".join(problems[:3]) or "no sample"
        return _m(None, detail=f"no SMART log read for {', '.join(missing)} ({why})")
    delta = sum(last[d] - first[d] for d in devices)
    text = ", ".join(f"{d}: {first[d]} -> {last[d]}" for d in devices)
    return _m(delta, text, detail=f"media errors at the first and the last sample per drive: {text}",
              evidence=[evidence])


def _raid(health: Sequence[dict[str, Any]], arrays: Sequence[str],
          evidence: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if not arrays:
        return _m(None, detail="no md array is known behind the KV target (inventory raid/device)"), []
    bad: list[dict[str, Any]] = []
    seen = 0
    for s in health:
        text = s.get("mdstat")
        if text is None:
            continue
        parsed = {a.name: a for a in parse_mdstat(str(text))}
        seen += 1
        for name in arrays:
            a = parsed.get(name)
            if a is None or a.degraded:
                failed = f", failed {','.join(a.failed_members)}" if a is not None and a.failed_members else ""
                why = "missing from /proc/mdstat" if a is None else f"degraded ({a.status or a.state}{failed})"
                bad.append({"t": s.get("t"), "array": name, "line": why, "evidence": evidence})
    if seen == 0:
        return _m(None, detail="/proc/mdstat was never read"), []
    return _m(len(bad), f"{len(bad)} degraded sample(s) of {seen}", detail=f"md arrays {', '.join(arrays)} "
              f"in {seen} samples of /proc/mdstat", evidence=[evidence]), bad


def _probe_answers(data: dict[str, Any]) -> dict[tuple[int, str], dict[str, Any]]:
    """(instance, request id) -> answer; a file from before the probes went to every instance
    names none: its answers are instance 0's."""
    return {(int(x.get("instance") or 0), str(x["request_id"])): x for x in data.get("answers") or []}


def _probes(local: Path, instances: int = 1) -> dict[str, Any]:
    """The greedy probe set, compared per engine instance: every instance the profile declares
    must have answered every probe at the start and at the end (else NOT_RUN, naming it)."""
    start = read_local_json(local / "probe-start.json")
    end = read_local_json(local / "probe-end.json")
    if start is None or end is None:
        return _m(None, detail="the greedy probe set was not answered at both the start and the end")
    a, b = _probe_answers(start), _probe_answers(end)
    missing = [f"instance {i} at the {when}" for i in range(max(1, instances))
               for when, got in (("start", a), ("end", b)) if not any(k[0] == i for k in got)]
    if missing:
        return _m(None, detail="no probe answer from " + ", ".join(missing)
                  + f" (the profile declares {instances} instance(s))")
    if not a or set(a) != set(b):
        return _m(None, detail="the probe sets at the start and the end differ or are empty")

    def name(k: tuple[int, str]) -> str:
        return f"instance {k[0]} {k[1]}" if instances > 1 else k[1]

    failed = [k for k in a if a[k].get("status") != "ok" or b[k].get("status") != "ok" or a[k].get("text") is None]
    if failed:
        return _m(None, detail=f"probe request(s) failed: {', '.join(name(k) for k in sorted(failed)[:5])}")
    differ = sorted(k for k in a if a[k].get("text") != b[k].get("text"))
    per = f" over {instances} instances" if instances > 1 else ""
    return _m(not differ, f"{len(a) - len(differ)} of {len(a)} identical{per}",
              detail="differ: " + ", ".join(name(k) for k in differ[:5]) if differ
              else f"{len(a)} greedy answers identical{per}",
              evidence=["evidence/soak/probe-start.json", "evidence/soak/probe-end.json"])


KV_ERROR_COUNTERS = ("kvgate_sim:store_errors", "kvgate_sim:read_errors")


def kv_errors(windows: Sequence[dict[str, Any]]) -> Optional[int]:
    """KV chunk writes/reads that failed during the soak: the engine's counter totals at the last
    window (the engine was started for the soak, so its totals count from the soak's start);
    None when the engine exposes no such counter."""
    with_counters = [w["counters"] for w in windows if isinstance(w.get("counters"), dict)]
    if not with_counters or not any(k in with_counters[-1] for k in KV_ERROR_COUNTERS):
        return None
    return int(sum(float(with_counters[-1].get(k, 0.0)) for k in KV_ERROR_COUNTERS))


def _count_leaf(readable: bool, items: list[dict[str, Any]], what: str, evidence: Sequence[str], extra: int = 0,
                extra_what: str = "") -> dict[str, Any]:
    """The count of fault ``items`` (plus ``extra``) when the kernel log was ``readable``;
    ``evidence``: the files of the samples that were read."""
    first = f"; first: {items[0]['line']}" if items else ""
    more = f"; {extra} {extra_what}" if extra else ""
    if not readable:
        if extra:  # a failure is certain even without the kernel log; a pass never is
            return _m(extra, f"{extra} (kernel log unreadable)", detail=f"the kernel log could not be read{more}")
        return _m(None, detail="the kernel log could not be read after the baseline sample (dmesg/journalctl)")
    n = len(items) + extra
    return _m(n, f"{len(items)} line(s)" + (f" + {extra} KV I/O errors" if extra else ""),
              detail=f"{what} lines in the kernel log during the soak{first}{more}",
              evidence=list(evidence))


def _restart_text(restarts: Sequence[dict[str, Any]], relaunched: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """(``n`` with the count per instance, every restart and relaunch named)."""
    per: dict[int, int] = {}
    for e in restarts:
        per[int(e.get("instance") or 0)] = per.get(int(e.get("instance") or 0), 0) + 1
    text = str(len(restarts))
    if len(per) > 1 or any(i > 0 for i in per):
        text += " (" + ", ".join(f"instance {i}: {n}" for i, n in sorted(per.items())) + ")"
    detail = "; ".join([f"{e.get('detail')} (pid {e.get('pid')})" for e in restarts]
                       + [str(e.get("detail") or f"instance {e.get('instance', 0)} relaunched as pid {e.get('pid')}")
                          for e in relaunched])
    return text, detail


def engine_restarts(events: Sequence[dict[str, Any]], *, engine_watched: bool,
                    watch_events: Sequence[dict[str, Any]] = (), watched_by_node: bool = False,
                    engine_node: str = "", engine_alive_at_end: Optional[bool] = None,
                    done: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Engine restarts during the soak, per instance. Engine on the soak's node: the soak's own
    watchdog (``events``). Engine on another node: that node's watchdog (``watch_events``), which
    vouches only when its events run from ``watch_start`` to a ``watch_end`` reached after the soak
    (``stopped`` by the controller once the soak had ended, or a later end), as the soak's own
    vouches only from ``soak_start`` to ``soak_end`` or ``done.json``; anything less is NOT_RUN
    unless a restart was seen (a failure is certain). A process found gone at the end
    (``engine_alive_at_end`` False) counts as one restart when none was seen."""
    node = f" on node {engine_node}" if engine_node else ""
    if engine_watched:
        src = list(events)
        evidence = [f"evidence/soak/{EVENTS}"]
    else:
        src = list(watch_events)
        evidence = [f"evidence/soak/watch/{EVENTS}"]
    restarts = [e for e in src if e.get("event") == "restart"]
    relaunched = [e for e in src if e.get("event") == "engine_relaunched"]
    health_bad = sum(1 for e in src if e.get("event") == "health_bad")
    text, detail = _restart_text(restarts, relaunched)
    health = f"; /health failed {health_bad} time(s)" if health_bad else ""
    if engine_watched:
        # The soak's own watchdog vouches from its soak_start to the soak's end (soak_end, or
        # done.json, written after it); events never pulled, or cut short, are not a quiet engine.
        uncovered: Optional[str] = None
        if not any(e.get("event") == "soak_start" for e in src):
            uncovered = "the soak's watchdog events were not pulled (no soak_start)"
        elif done is None and not any(e.get("event") == "soak_end" for e in src):
            uncovered = "the soak's watchdog events stop before the soak's end (no soak_end, no done.json)"
        if uncovered is not None and not restarts:
            return _m(None, detail=uncovered)
        return _m(len(restarts), text, detail=(detail or "the engine process kept its identity (pid and start time)")
                  + health + (f" ({uncovered})" if uncovered else ""), evidence=evidence)
    gone = engine_alive_at_end is False
    why = _watch_uncovered(src, watched_by_node=watched_by_node, node=node, done=done)
    if why is not None:
        if restarts:  # a restart seen is a failure whatever was not seen
            return _m(len(restarts), text, detail=f"{detail}{health} ({why})", evidence=evidence)
        if gone:
            return _m(1, "1", detail=f"the engine{node} was gone at the end ({why})")
        return _m(None, detail=why)
    if not restarts and gone:
        return _m(1, "1", detail=f"the engine{node} was gone at the end, though its watchdog saw no restart")
    kept = ("watched on its node" + (f" {engine_node}" if engine_node else "")
            + ": every instance kept its identity (pid and start time)")
    return _m(len(restarts), text, detail=(detail or kept) + health, evidence=evidence)


def _watch_uncovered(src: Sequence[dict[str, Any]], *, watched_by_node: bool, node: str,
                     done: Optional[dict[str, Any]]) -> Optional[str]:
    """Why the engine node's watchdog events do not vouch for the whole soak (None: they do)."""
    if not watched_by_node:
        return f"the engine{node} was not watched during the soak (its node's watchdog was not started)"
    if not any(e.get("event") == "watch_start" for e in src):
        return f"the watchdog of the engine{node} left no events here (never started, or never pulled)"
    end = next((e for e in src if e.get("event") == "watch_end"), None)
    if end is None:
        last = max(float(e.get("t") or 0.0) for e in src)
        return (f"the watchdog of the engine{node} was pulled only up to {last:.0f} (no watch_end): "
                "the rest of the soak is unseen")
    if end.get("reason") != "stopped" and (done is None or float(end.get("t") or 0.0)
                                           < float(done.get("ended_unix") or float("inf"))):
        return f"the watchdog of the engine{node} ended ({end.get('reason')}) before the soak did"
    return None


def _run_windows(side: dict[str, Any]) -> list[list[float]]:
    """The steady windows of a side's runs (a one-run leaf of ``fio_leaf`` is one run)."""
    if "run_windows" in side:
        return [list(w) for w in side["run_windows"]]
    x = (side.get("samples") or {}).get("x")
    return [list(x)] if x else []


def side_leaf(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One side of the soak (before or after) as one leaf: the geometric mean of its independent fio
    runs' figures (each the median of its steady window, ``measured.rounds_leaf``) and every run's
    window, which ``retention_leaf`` decides on. A run that measured nothing leaves the side
    unmeasured; a run that cannot be signed (not steady, not drained) makes it INCONCLUSIVE."""
    values = [r.get("value") for r in runs]
    if not runs or not all(isinstance(v, (int, float)) and v > 0 for v in values):
        missing = [f"run {i + 1}: {r.get('detail') or 'not measured'}" for i, r in enumerate(runs)
                   if not (isinstance(r.get("value"), (int, float)) and r.get("value"))]
        return _m(None, detail="; ".join(missing) or "no fio run")
    geo = math.exp(statistics.fmean(math.log(float(v)) for v in values))  # type: ignore[arg-type]
    figures = ", ".join(str(r.get("text")) for r in runs)
    leaf = _m(geo, format_quantity(geo, UnitKind.BANDWIDTH),
              detail=f"geometric mean of {len(runs)} independent fio runs ({figures}); run 1: {runs[0].get('detail')}",
              evidence=[e for r in runs for e in (r.get("evidence") or [])])
    leaf["run_windows"] = [w for r in runs for w in _run_windows(r)]
    why = [f"run {i + 1}: {r['inconclusive']}" for i, r in enumerate(runs) if r.get("inconclusive")]
    if why:
        leaf["inconclusive"] = "; ".join(why)
    return leaf


def retention_leaf(fio_before: Optional[dict[str, Any]], fio_after: Optional[dict[str, Any]]) -> dict[str, Any]:
    """Read bandwidth after the soak / before it, both sides measured under the same protocol
    (``harness.probes.fio_rounds``) in independent runs (``side_leaf``). Decided on the runs: the
    cluster-level t interval of the mean per-run log median after minus before
    (``harness.gates.stats``, Welch), never on the rounds of one run per side. Consecutive rounds of
    one run share that run's level, and on this project's VM the level wandered by 10-30% between
    runs minutes apart while each run's rounds agreed within 5%: across nine demos with no
    degradation the ratio of one run per side read 80-128%, and the interval on rounds excluded
    100% in both directions ([67%, 84%] FAIL, [122%, 141%] PASS). Fewer than the gate's minimum
    runs per side (``MIN_INTERVAL_SAMPLES``) is INCONCLUSIVE. Either side unsignable (not steady,
    not drained) makes it INCONCLUSIVE; either side missing, NOT_RUN."""
    before = (fio_before or {}).get("value")
    after = (fio_after or {}).get("value")
    if not (isinstance(before, (int, float)) and isinstance(after, (int, float)) and before > 0):
        missing = [f"{side}: {(leaf or {}).get('detail') or 'not measured'}"
                   for side, leaf, v in (("before", fio_before, before), ("after", fio_after, after))
                   if not isinstance(v, (int, float)) or not v]
        return _m(None, detail="; ".join(missing) or "no fio figure")
    assert fio_before is not None and fio_after is not None
    ga, gb = _run_windows(fio_after), _run_windows(fio_before)
    leaf = _m(after / before, f"{after / before * 100:.1f}%",
              detail=f"fio read {fio_after.get('text')} after / {fio_before.get('text')} before, "
                     f"{len(ga)} / {len(gb)} independent runs (same job set, target and protocol)",
              evidence=list(fio_before.get("evidence") or []) + list(fio_after.get("evidence") or []))
    if ga and gb:
        leaf["samples"] = {"kind": "ratio", "a_groups": ga, "b_groups": gb, "stat": "median", "transform": "ratio",
                           "members": "rounds"}
    why = [f"{side}: {leaf_side['inconclusive']}" for side, leaf_side in (("before", fio_before),
                                                                          ("after", fio_after))
           if leaf_side.get("inconclusive")]
    if why:
        leaf["inconclusive"] = "; ".join(why)
    return leaf


def soak_measured(local: Path, *, duration_target_s: float, window_s: float, nvme: Sequence[str] = (),
                  md_arrays: Sequence[str] = (), fio_before: Optional[dict[str, Any]] = None,
                  fio_after: Optional[dict[str, Any]] = None, engine_watched: bool = True,
                  engine_alive_at_end: Optional[bool] = None,
                  warmup_s: float = 0.0,
                  accel_tools: Sequence[str] = (),
                  instances: int = 1,
                  windows: Optional[list[dict[str, Any]]] = None,
                  concurrency: Optional[int] = None,
                  request_rate: Optional[float] = None, watch: Optional[Path] = None,
                  engine_node: str = "", health_from_watch: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(measured, charts)`` of a soak whose files are in ``local`` (see the module docstring).
    ``instances``: the engine instances the profile has the soak drive; with more than one, the
    drift is also measured per instance (``soak.instance_drift``). ``windows``: the window figures
    to decide on when the caller checked them against their records (``soakverify``); default: the
    node's index as pulled. ``concurrency`` / ``request_rate``: the profile's soak level (closed /
    open loop), which ``soak.load_level`` is measured against (None: NOT_RUN). ``watch``: the local
    copy of the engine node's watchdog when the engine ran on another node (``engine_watched``
    False), see :func:`engine_restarts`. Every instance must answer the probe set too.
    ``health_from_watch``: the engine's node (KV target, accelerators) was sampled by its
    watchdog: those samples decide storage, accelerator, SMART, RAID and free space (none there:
    NOT_RUN, never the load node's), and network faults are counted on both nodes."""
    if windows is None:
        windows = read_local_jsonl(local / WINDOWS_INDEX)
    events = read_local_jsonl(local / EVENTS)
    load_health = read_local_jsonl(local / HEALTH)
    done = read_local_json(local / DONE)
    watch_events = read_local_jsonl(watch / EVENTS) if watch is not None else []
    soak: dict[str, Any] = {"duration": _duration_leaf(windows, done, window_s, duration_target_s),
                            "failed_ratio": _failed_ratio_leaf(windows)}
    soak["engine_restarts"] = engine_restarts(events, engine_watched=engine_watched, watch_events=watch_events,
                                              watched_by_node=watch is not None, engine_node=engine_node,
                                              engine_alive_at_end=engine_alive_at_end, done=done)
    full, note = _drift_windows(windows, window_s, warmup_s)
    soak.update(_drift_leaves(full, note, instances=instances, concurrency=concurrency, request_rate=request_rate))
    soak["read_bw_retention"] = retention_leaf(fio_before, fio_after)
    health, health_ev = load_health, f"evidence/soak/{HEALTH}"
    if health_from_watch:  # the load's node says nothing of the engine node's storage or accelerators
        health = read_local_jsonl(watch / HEALTH) if watch is not None else []
        health_ev = f"evidence/soak/watch/{HEALTH}"
    errors, kfaults = _error_leaves(health, health_ev, load_health if health_from_watch else None, windows,
                                    accel_tools)
    soak.update(errors)
    soak["media_errors_delta"] = _smart(health, nvme, health_ev)
    soak["raid_degraded"], raid_bad = _raid(health, md_arrays, health_ev)
    soak["probe_identical"] = _probes(local, instances)
    charts = soak_charts(windows, _tagged_events(events, watch_events, engine_node), kfaults, raid_bad, window_s,
                         health, health_ev)
    charts["warmup_s"] = warmup_s
    charts["drift_windows"] = [w.get("index") for w in full]
    charts["trend"] = {"ttft_p50_ms": trend(full, "ttft_p50_ms"), "throughput_tok_s": trend(full, "throughput_tok_s")}
    charts["fio"] = {"before": (fio_before or {}).get("value"), "after": (fio_after or {}).get("value")}
    return {"soak": soak}, charts


def _duration_leaf(windows: Sequence[dict[str, Any]], done: Optional[dict[str, Any]], window_s: float,
                   duration_target_s: float) -> dict[str, Any]:
    """Duration: time under load, from the first window's start to the last window's end (the
    node's clock); done.json says why it ended."""
    if not windows:
        return _m(None, detail="no window was closed")
    elapsed, stalled = time_under_load(windows, window_s)
    why = f"ended: {done.get('reason')}" if done is not None else "the soak left no done.json"
    wall = float(windows[-1]["ended_unix"]) - float(windows[0]["started_unix"])
    extra = ""
    if stalled:
        extra = (f"; {len(stalled)} window(s) lasted longer than the {window_s:g} s window (the agent stalled, "
                 f"or the node's clock jumped) and count at {window_cap(window_s):g} s: "
                 + ", ".join(stalled[:5]) + f"; wall time {wall:.0f} s")
    return _m(elapsed, f"{elapsed:.0f} s", detail=f"{why}; {len(windows)} windows; profile "
              f"duration {duration_target_s:.0f} s{extra}", evidence=[f"evidence/soak/{WINDOWS_INDEX}"])


def _failed_ratio_leaf(windows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Failed requests over all requests of every window, with the failures by kind."""
    ok = sum(int(w.get("ok") or 0) for w in windows)
    failed = sum(int(w.get("failed") or 0) for w in windows)
    failures: dict[str, int] = {}
    for w in windows:
        for k, v in (w.get("failures") or {}).items():
            failures[k] = failures.get(k, 0) + int(v)
    total = ok + failed
    return _m(failed / total if total else None, f"{failed} of {total}",
              detail=("failures by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(failures.items()))
                      if failures else "no failure") if total else "no request completed",
              evidence=[f"evidence/soak/{WINDOWS_INDEX}"])


def _tagged_events(events: Sequence[dict[str, Any]], watch_events: Sequence[dict[str, Any]],
                   engine_node: str) -> list[dict[str, Any]]:
    """The soak's and the engine node's watchdog events, each with its evidence file (for the charts)."""
    where = f"engine node {engine_node}" if engine_node else "engine node"
    return [{**e, "evidence": f"evidence/soak/{EVENTS}"} for e in events] + [
        {**e, "detail": f"{where}: {e.get('detail') or e.get('event')}", "evidence": f"evidence/soak/watch/{EVENTS}"}
        for e in watch_events]


def _drift_windows(windows: Sequence[dict[str, Any]], window_s: float,
                   warmup_s: float) -> tuple[list[dict[str, Any]], str]:
    """The full windows after the warm-up the drift is measured on, and the note saying so."""
    full = after_warmup(full_windows(windows, window_s), warmup_s,
                        float(windows[0]["started_unix"]) if windows else None)
    note = ""
    if warmup_s > 0:
        skipped = len(full_windows(windows, window_s)) - len(full)
        note = f" after the {warmup_s:g} s warm-up ({skipped} window(s) left out)"
    return full, note


def _drift_leaves(full: list[dict[str, Any]], note: str, *, instances: int, concurrency: Optional[int],
                  request_rate: Optional[float]) -> dict[str, Any]:
    """TTFT and throughput drift, the load level held, and (several instances) the drift per instance."""
    out: dict[str, Any] = {
        "ttft_p50_drift": drift_leaf(full, "ttft_p50_ms", "gain", "TTFT p50", note),
        "throughput_drift": drift_leaf(full, "throughput_tok_s", "reduction", "output throughput", note,
                                       stat="mean"),
        "load_level": load_level(full, concurrency=concurrency, request_rate=request_rate, warmup_note=note),
    }
    if instances > 1:
        out["instance_drift"] = instance_drift(full, instances, note)
    return out


def _error_leaves(health: Sequence[dict[str, Any]], health_ev: str,
                  load_health: Optional[Sequence[dict[str, Any]]], windows: Sequence[dict[str, Any]],
                  accel_tools: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Storage, network and accelerator error counts, and the kernel faults by kind (for the charts).
    ``health``: the samples of the engine's node; ``load_health``: the load node's, when they are
    another node's (network faults are then counted on both nodes)."""
    readable, kfaults = _kernel(health, health_ev)
    if load_health is not None:
        load_ev = f"evidence/soak/{HEALTH}"
        load_readable, load_faults = _kernel(load_health, load_ev)
        readable_net = readable and load_readable
        net_faults = sorted(kfaults["network"] + load_faults["network"], key=lambda f: float(f.get("t") or 0.0))
        net_ev = [health_ev, load_ev]
    else:
        readable_net, net_faults, net_ev = readable, kfaults["network"], [health_ev]
    kv = kv_errors(windows)
    out: dict[str, Any] = {}
    out["storage_errors"] = _count_leaf(readable, kfaults["storage"], "storage (NVMe, blk, md, filesystem)",
                                        [health_ev], extra=kv or 0,
                                        extra_what="KV chunk writes/reads failed in the engine (its counters)")
    kfaults["network"] = net_faults
    out["network_errors"] = _count_leaf(readable_net, net_faults, "network (mlx5/RoCE link, NIC health)", net_ev)
    out["accelerator_errors"] = _accelerator_leaf(health, health_ev, readable, kfaults, accel_tools)
    return out, kfaults


def _accelerator_leaf(health: Sequence[dict[str, Any]], health_ev: str, readable: bool, kfaults: dict[str, Any],
                      accel_tools: Sequence[str]) -> dict[str, Any]:
    """Accelerator faults from the kernel log and the accelerators' own tools (merged into
    ``kfaults["accelerator"]`` for the charts)."""
    accel_unreadable, accel_faults = _accel(health, accel_tools, health_ev)
    kfaults["accelerator"] = sorted(kfaults["accelerator"] + accel_faults, key=lambda f: float(f.get("t") or 0.0))
    if accel_unreadable and readable:
        # the kernel log alone cannot vouch for accelerators whose own tool could not be read
        items = kfaults["accelerator"]
        why = "; ".join(accel_unreadable.values())
        return (_m(len(items), f"{len(items)} line(s) ({why})", detail=f"first: {items[0]['line']}",
                   evidence=[health_ev]) if items
                else _m(None, detail=f"accelerator fault counters not read: {why}"))
    return _count_leaf(readable, kfaults["accelerator"],
                       "accelerator (Xid, GPU reset, NPU; "
                       + (", ".join(accel_tools) + " counters" if accel_tools else "kernel log only") + ")",
                       [health_ev])


def _hit_rates(windows: Sequence[dict[str, Any]]) -> list[Optional[float]]:
    """Per window, prompt tokens served from a cache / looked up, from consecutive counter totals
    (engine prefix cache plus external/LMCache tiers); None when the counters are missing."""
    out: list[Optional[float]] = []
    prev: Optional[dict[str, float]] = None
    for w in windows:
        cur = w.get("counters")
        rate: Optional[float] = None
        if isinstance(cur, dict) and isinstance(prev, dict):
            def d(name: str, c: dict[str, float] = cur, p: dict[str, float] = prev) -> float:
                return max(0.0, float(c.get(name, 0.0)) - float(p.get(name, 0.0)))
            queries = d("vllm:prefix_cache_queries")
            hits = d("vllm:prefix_cache_hits") + d("vllm:external_prefix_cache_hits")
            rate = min(1.0, hits / queries) if queries > 0 else None
        out.append(rate)
        prev = cur if isinstance(cur, dict) else None
    return out


def soak_charts(windows: Sequence[dict[str, Any]], events: Sequence[dict[str, Any]],
                kfaults: dict[str, list[dict[str, Any]]], raid_bad: Sequence[dict[str, Any]],
                window_s: float, health: Sequence[dict[str, Any]] = (),
                health_evidence: str = f"evidence/soak/{HEALTH}") -> dict[str, Any]:
    """Per-window series for the report and the table of every fault with its time and evidence:
    the file it was read from, as each event and fault names it (the engine node's watchdog keeps
    its own files, under ``soak/watch/``); ``health``: the samples of the KV target's node, kept in
    ``health_evidence``."""
    t0 = float(windows[0]["started_unix"]) if windows else 0.0
    hits = _hit_rates(windows)
    series = [{"index": w.get("index"), "t_s": round(float(w["ended_unix"]) - t0, 3),
               "ttft_p50_ms": w.get("ttft_p50_ms"), "ttft_p99_ms": w.get("ttft_p99_ms"),
               "throughput_tok_s": w.get("throughput_tok_s"), "requests": w.get("requests"),
               "failed": w.get("failed"), "hit_rate": h, "length_s": w.get("length_s")}
              for w, h in zip(windows, hits)]
    faults: list[dict[str, Any]] = []
    for e in events:
        if e.get("event") in ("restart", "health_bad", "engine_back", "probe_error", "watchdog_error"):
            faults.append({"t_s": round(float(e.get("t") or t0) - t0, 3), "kind": e.get("event"),
                           "what": str(e.get("detail") or ""),
                           "evidence": e.get("evidence") or f"evidence/soak/{EVENTS}"})
    for kind, items in kfaults.items():
        for f in items:
            src = f.get("source")
            faults.append({"t_s": round(float(f.get("t") or t0) - t0, 3),
                           "kind": f"{kind} ({src})" if src in ("amd-smi", "npu-smi") else f"kernel {kind}",
                           "what": f["line"], "evidence": f.get("evidence") or health_evidence})
    for b in raid_bad:
        faults.append({"t_s": round(float(b.get("t") or t0) - t0, 3), "kind": "raid",
                       "what": f"{b['array']}: {b['line']}", "evidence": b.get("evidence") or health_evidence})
    prev_kv = 0.0
    for w in windows:
        c = w.get("counters")
        if isinstance(c, dict):
            kv = sum(float(c.get(k, 0.0)) for k in KV_ERROR_COUNTERS)
            if kv > prev_kv:
                faults.append({"t_s": round(float(w["ended_unix"]) - t0, 3), "kind": "kv store errors",
                               "what": f"window {w.get('index')}: {kv - prev_kv:.0f} KV chunk writes/reads failed",
                               "evidence": f"evidence/soak/{WINDOWS_INDEX}"})
            prev_kv = kv
    for w in windows:
        if w.get("failed"):
            faults.append({"t_s": round(float(w["ended_unix"]) - t0, 3), "kind": "failed requests",
                           "what": f"window {w.get('index')}: {w.get('failed')} failed "
                           f"({json.dumps(w.get('failures') or {})})", "evidence": f"evidence/soak/{w.get('file')}"})
    full_once = False
    for h in health:
        free = h.get("target_free_bytes")
        if isinstance(free, int) and free < FULL_BYTES and not full_once:
            full_once = True  # the first time only: a full target stays full for many samples
            faults.append({"t_s": round(float(h.get("t") or t0) - t0, 3), "kind": "kv target full",
                           "what": f"{free} bytes free on the KV target", "evidence": health_evidence})
    faults.sort(key=lambda f: f["t_s"])
    return {"windows": series, "faults": faults, "window_s": window_s}
