"""Collect a node's facts over its Executor.

Every command is an argument list (the few that need a shell glob run a constant ``sh -c``
script, with any inventory value passed as a positional argument, never pasted into it). A tool
that is not on the node is recorded in ``NodeFacts.missing``; a command that fails or prints
something the parser does not understand is recorded in ``NodeFacts.errors``; every output is
kept in ``NodeFacts.raw`` (command -> output) as evidence. Nothing here raises for a missing
tool or a bad output; a node that cannot be reached at all raises the executor's
``Unreachable``/``ConnectionLost`` (an infrastructure fault, for the caller to record).

Batched collection: over an executor that takes a batch of commands in one exchange
(``harness.remote.batch``: Ray, where each exchange is an actor call), the collection runs in
passes over the node's answers so far. A pass that meets a look-up or command with no answer yet
notes it and goes on as if it had failed (so the fallbacks behind it are noted too); the notes of
a pass go to the node as one batch; the first pass that meets no unanswered item is the result,
every fact of it decided by real answers, exactly as one command at a time would decide it. A
node's facts take as many batches as the longest chain of commands that depend on an earlier
output (2-3: a target's ``df`` after its probe, ``mdadm`` after the mounts). The price: a fallback
(``rocm-smi`` after ``amd-smi``, sysfs after ``ethtool``) runs even when what it falls back from
works; facts commands only read. Over any other executor each command runs when it is met, once.
"""

from __future__ import annotations

import datetime as _dt
import re
import shlex
from collections.abc import Callable, Sequence
from typing import Optional, TypeVar, Union

from harness.config.inventory import Node
from harness.errors import InfraError
from harness.facts.model import NodeFacts, StorageTargetFacts
from harness.facts.parsers import FactsError, FactsParseError, network, storage, system
from harness.platforms import PLATFORMS, get_platform
from harness.remote.base import CommandTimeout, Executor, RemoteError, RunResult, tail
from harness.remote.batch import Answer, BatchCommand, batches, run_many

__all__ = ["collect_facts", "COMMAND_TIMEOUT_S", "FactsUnsettled"]

COMMAND_TIMEOUT_S = 120.0
MAX_PASSES = 8  # far above the longest chain of dependent commands (a guard against a bug, not a limit)
T = TypeVar("T")

_TARGET_PROBE = (
    'd="$1"; f="$d/.kvgate-write-probe-$$"; '
    'if [ -d "$d" ]; then echo dir; if : > "$f" 2>/dev/null; then rm -f "$f"; echo writable; fi; fi'
)
_IFACE = re.compile(r"^[A-Za-z0-9_.:@-]{1,32}\Z")


class FactsUnsettled(FactsError, InfraError):
    """A batched collection still asked the node for new commands after ``MAX_PASSES`` batches: the
    node's answers keep naming more to look at (or a collector has a bug). No facts are returned, so
    nothing is compared on guesses; the node is a fault (exit 4), the other nodes keep theirs."""

    def __init__(self, node: str, passes: int, tools: Sequence[str], commands: Sequence[BatchCommand]) -> None:
        self.node = node
        self.pending = [f"which {t}" for t in tools] + [shlex.join(c.argv) for c in commands]
        shown = "; ".join(self.pending[:8]) + (f"; and {len(self.pending) - 8} more" if len(self.pending) > 8 else "")
        super().__init__(f"{node}: the facts collection still asked for new commands after {passes} batches "
                         f"(still pending: {shown})")


class _Pending:
    """The answer of a command a batched pass has not got yet."""


_PENDING = _Pending()


class _Answers:
    """What the node answered so far: look-ups (tool -> path or None) and commands (argv -> answer)."""

    def __init__(self) -> None:
        self.which: dict[str, Optional[str]] = {}
        self.runs: dict[tuple[str, ...], Answer] = {}


class _Collector:
    """One pass of the collection. ``direct``: unanswered items are asked of the executor at once;
    else they are noted in ``wanted_tools``/``wanted`` (for the next batch) and count as failed."""

    def __init__(self, executor: Executor, facts: NodeFacts, python: str, answers: _Answers,
                 *, direct: bool) -> None:
        self.ex = executor
        self.facts = facts
        self.python = python
        self.answers = answers
        self.direct = direct
        self.wanted_tools: list[str] = []
        self.wanted: list[BatchCommand] = []

    def _found(self, tool: str) -> Optional[bool]:
        """Is ``tool`` on the node (None: not known yet, noted for the next batch)."""
        if tool not in self.answers.which:
            if not self.direct:
                if tool not in self.wanted_tools:
                    self.wanted_tools.append(tool)
                return None
            self.answers.which[tool] = self.ex.which(tool)
        return self.answers.which[tool] is not None

    def has(self, tool: str) -> bool:
        # not known yet: taken as present, so that the pass notes the commands that depend on it too
        return self._found(tool) is not False

    def _answer(self, argv: tuple[str, ...], tool: str) -> Union[Answer, _Pending]:
        found = self._found(tool)
        if found is False:
            return None
        if argv in self.answers.runs:
            return self.answers.runs[argv]
        if not self.direct:
            if all(c.argv != argv for c in self.wanted):
                self.wanted.append(BatchCommand(argv, COMMAND_TIMEOUT_S, tool))
            return _PENDING
        try:
            got: Answer = self.ex.run(list(argv), check=False, timeout=COMMAND_TIMEOUT_S)
        except CommandTimeout as exc:
            got = exc
        self.answers.runs[argv] = got
        return got

    def run(self, argv: Sequence[str], *, tool: Optional[str] = None, key: Optional[str] = None,
            ok_codes: tuple[int, ...] = (0,)) -> Optional[RunResult]:
        """Run ``argv``; None (and a recorded fact) when the tool is missing or the command fails."""
        tool = tool or argv[0]
        key = key or shlex.join(argv)
        res = self._answer(tuple(argv), tool)
        if res is _PENDING:
            return None
        if res is None:
            if tool not in self.facts.missing:
                self.facts.missing.append(tool)
            return None
        if isinstance(res, CommandTimeout):
            self.facts.errors[key] = f"timed out after {COMMAND_TIMEOUT_S:g} s"
            self.facts.raw[key] = res.stdout + (("\n[stderr]\n" + res.stderr) if res.stderr else "")
            return None
        if isinstance(res, RemoteError):
            raise res  # as the command itself would have raised it, one at a time
        assert isinstance(res, RunResult)
        self.facts.raw[key] = res.stdout + (("\n[stderr]\n" + res.stderr) if res.stderr.strip() else "")
        if res.exit_code not in ok_codes:
            why = tail(res.stderr or res.stdout, 3).strip() or "no output"
            self.facts.errors[key] = f"exit code {res.exit_code}: {why}"
            return None
        return res

    def parse(self, key: str, fn: Callable[..., T], *args: object) -> Optional[T]:
        try:
            return fn(*args)
        except FactsParseError as exc:
            self.facts.errors[key] = str(exc)
            return None

    def run_parse(self, argv: Sequence[str], fn: Callable[..., T], *args: object, tool: Optional[str] = None,
                  key: Optional[str] = None, ok_codes: tuple[int, ...] = (0,)) -> Optional[T]:
        """Run ``argv`` and parse its stdout with ``fn(*args, stdout)``; None when either fails."""
        key = key or shlex.join(argv)
        res = self.run(argv, tool=tool, key=key, ok_codes=ok_codes)
        if res is None:
            return None
        return self.parse(key, fn, *args, res.stdout)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _collect_accelerators(c: _Collector, node: Node) -> None:
    hook = get_platform(node.platform).collect_accelerators
    if hook is not None:
        hook(c)


def _collect_storage(c: _Collector, node: Node) -> None:
    if not node.storage:
        return
    c.facts.nvme = c.run_parse(("nvme", "list", "-o", "json"), storage.parse_nvme_list)
    c.facts.mounts = c.run_parse(("cat", "/proc/mounts"), storage.parse_proc_mounts)
    md_devices: list[str] = []
    for target in node.storage:
        probe = c.run(("sh", "-c", _TARGET_PROBE, "sh", target.path), key=f"probe {target.path}")
        if probe is None:
            continue
        words = probe.stdout.split()
        tf = StorageTargetFacts(path=target.path, exists="dir" in words, writable="writable" in words)
        if c.facts.mounts is not None:
            tf.mount = storage.mount_for(target.path, c.facts.mounts)
        if tf.exists:
            usage = c.run_parse((*storage.DF_ARGV_PREFIX, target.path), storage.parse_df)
            tf.usage = usage[0] if usage else None
        tf.device_models = _device_models(c, target.device or (tf.mount.source if tf.mount else None), tf)
        c.facts.targets[target.name] = tf
        for dev in (target.device, tf.mount.source if tf.mount else None):
            if dev and re.fullmatch(r"/dev/md[0-9A-Za-z/_-]*", dev) and dev not in md_devices:
                md_devices.append(dev)
    for dev in md_devices:
        arr = c.run_parse(("mdadm", "--detail", "--export", dev), storage.parse_mdadm_export, dev)
        if arr is not None:
            c.facts.raid[dev] = arr


def _device_models(c: _Collector, device: Optional[str], tf: StorageTargetFacts) -> Optional[list[str]]:
    """The models of the block devices behind a target (part of the hardware fingerprint); [] when
    its mount has no block device (tmpfs, NFS); None when unknown (no mount, lsblk missing or failed)."""
    if device is None:
        return None
    if not device.startswith("/dev/"):
        return []
    return c.run_parse((*storage.LSBLK_MODELS_ARGV_PREFIX, device), storage.parse_lsblk_models)


def _collect_network(c: _Collector, node: Node) -> None:
    for spec in node.network:
        iface = spec.interface
        if not _IFACE.match(iface):
            c.facts.errors[f"link {iface}"] = "not a valid interface name"
            continue
        link = c.run_parse(("ethtool", iface), network.parse_ethtool, iface)
        if link is None or link.speed_bps is None:
            # /sys/class/net/IFACE/speed: cat exits 1 (EINVAL) when the link is down
            fallback = c.run_parse(("cat", f"/sys/class/net/{iface}/speed"), network.parse_sysfs_speed, iface,
                                   ok_codes=(0, 1))
            if fallback is not None and (link is None or fallback.speed_bps is not None):
                link = fallback if link is None else link.model_copy(update={"speed_bps": fallback.speed_bps})
        if link is not None:
            c.facts.links[iface] = link
    if any(s.roce or s.rdma_device for s in node.network):
        ports = c.run_parse(("ibv_devinfo",), network.parse_ibv_devinfo)
        gids = c.run(("sh", "-c", network.GID_SCRIPT), key="sysfs gid_attrs")
        if gids is not None:
            ports = network.apply_gid_attrs(ports if ports is not None else [], gids.stdout)
        c.facts.rdma = ports


def _collect_system(c: _Collector, node: Node) -> None:
    kernel = c.run(("uname", "-r"))
    if kernel is not None:
        c.facts.versions["kernel"] = kernel.stdout.strip()
    c.facts.os = c.run_parse(("cat", "/etc/os-release"), system.parse_os_release_with_kernel,
                             kernel.stdout if kernel else "")
    versions = c.run_parse((c.python, "-c", system.PY_VERSIONS_SCRIPT), system.parse_py_versions,
                           key=f"{c.python} -c <package versions>")
    if versions:
        c.facts.versions.update(versions)
    # the C locale: lscpu translates its labels
    c.facts.cpu_model = c.run_parse(("env", "LC_ALL=C", "lscpu"), system.parse_lscpu_model, tool="lscpu",
                                    key="lscpu")
    c.facts.memory_bytes = c.run_parse(("cat", "/proc/meminfo"), system.parse_meminfo_total)
    fio = c.run_parse(("fio", "--version"), system.parse_fio_version)
    if fio:
        c.facts.versions["fio"] = fio
    wanted = {k.lower() for k in node.software}
    for platform in PLATFORMS.values():
        hook = platform.collect_software_version
        if hook is not None and (platform.name == node.platform or platform.software_key in wanted):
            hook(c)


def _collect(c: _Collector, node: Node) -> None:
    _collect_system(c, node)
    _collect_accelerators(c, node)
    _collect_storage(c, node)
    _collect_network(c, node)


def collect_facts(executor: Executor, node: Node, *, python: str = "python3") -> NodeFacts:
    """Everything G1 compares for ``node``, gathered through ``executor`` (in batches when it takes
    them: see the module's docstring)."""
    collected_at = _now()
    answers = _Answers()
    direct = not batches(executor)
    for _ in range(MAX_PASSES):
        facts = NodeFacts(node=node.name, collected_at=collected_at)
        c = _Collector(executor, facts, python, answers, direct=direct)
        _collect(c, node)
        if direct or not (c.wanted_tools or c.wanted):
            return facts
        got = run_many(executor, c.wanted_tools, c.wanted)
        answers.which.update(got.which)
        answers.runs.update(zip((cmd.argv for cmd in c.wanted), got.answers))
    c = _Collector(executor, NodeFacts(node=node.name, collected_at=collected_at), python, answers, direct=False)
    _collect(c, node)
    raise FactsUnsettled(node.name, MAX_PASSES, c.wanted_tools, c.wanted)
