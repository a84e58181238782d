"""``SSHExecutor``: the Executor protocol over SSH (paramiko), safe by default.

* Commands: ``exec sh -c RUN kvgate-run <cwd> [env K=V ...] argv...``, one ``shlex.join`` of an
  argument list; the only script is the constant ``RUN`` below. It reports the command's process
  group on stderr first (stripped from the output) so a timeout can kill the whole group, and it
  waits for the command (no exec) so a death by signal N comes back as exit code 128+N (paramiko
  ignores SSH's exit-signal).
* Host keys: verified against known_hosts (``hostkeys.KnownHostsPolicy``); TOFU only on request.
* Liveness: a thread sends ``keepalive@openssh.com`` every ``keepalive`` seconds and expects an
  answer within ``liveness_timeout``; otherwise the connection is closed, and a command running on
  it raises ``ConnectionLost`` (paramiko's own keepalive never notices a silent peer).
* Reconnect: a new command after a lost connection reconnects, with backoff.
"""

from __future__ import annotations

import logging
import os
import select
import shlex
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Optional

import paramiko

from harness.deletion import remove_file, remove_name_with
from harness.errors import InputError
from harness.remote import detached
from harness.remote.base import (
    MAX_CALLBACK_LINE,
    MAX_OUTPUT_BYTES,
    CommandTimeout,
    ConnectionLost,
    HostKeyError,
    LineCallback,
    OutputTooLarge,
    RemoteError,
    RemoteFileNotFound,
    RunResult,
    TransferError,
    Unreachable,
    checked,
)
from harness.remote.commands import check_argv, env_prefix
from harness.remote.hostkeys import KnownHosts, KnownHostsPolicy, preferring_known_types, read_known_hosts
from harness.remote.hostmatch import lookup_name
from harness.remote.keys import PassphraseSource, load_key
from harness.remote.local import sha256_file

if TYPE_CHECKING:
    from harness.config.inventory import Inventory

log = logging.getLogger(__name__)

# $1 = working directory ("" for the login directory); the rest is the command (maybe `env K=V ...`).
RUN = """printf 'KVGATE-PID %s\\n' "$$" >&2
if [ -n "$1" ]; then cd -- "$1" || exit 2; fi
shift
"$@"
exit "$?"
"""
_PID_PREFIX = b"KVGATE-PID "
# How long a timed-out command may still take to report its process group before it is given up.
PID_GRACE_S = 5.0

# $1 = process group; TERM, up to 2 s for it to go, then KILL.
KILL_GROUP = """kill -s TERM -- "-$1" 2>/dev/null || exit 0
i=0
while kill -0 -- "-$1" 2>/dev/null && [ "$i" -lt 20 ]; do sleep 0.1; i=$((i + 1)); done
kill -s KILL -- "-$1" 2>/dev/null
exit 0
"""

SHA256 = """if command -v sha256sum >/dev/null 2>&1; then sha256sum -b -- "$1"
else python3 -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$1"
fi
"""

WHICH = 'command -v -- "$1"'


class _Liveness(threading.Thread):
    """Asks the server for an answer every ``interval`` s; calls ``on_dead`` when none comes in
    ``timeout`` s or the transport stops."""

    def __init__(self, transport: paramiko.Transport, interval: float, timeout: float,
                 on_dead: Callable[[str], None], node: str) -> None:
        super().__init__(daemon=True, name=f"kvgate-liveness-{node}")
        self.transport = transport
        self.interval = interval
        self.timeout = timeout
        self.on_dead = on_dead
        self.stopped = threading.Event()

    def _probe(self, answered: threading.Event) -> None:
        try:
            # keepalive@openssh.com: OpenSSH answers (with a failure reply), which is all we need.
            self.transport.global_request("keepalive@openssh.com", wait=True)
        except Exception:  # noqa: BLE001, S110 - a dead transport; noticed by the caller
            pass
        finally:
            answered.set()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            if not self.transport.is_active():
                self.on_dead("the connection was closed")
                return
            answered = threading.Event()
            threading.Thread(target=self._probe, args=(answered,), daemon=True,
                             name="kvgate-keepalive").start()
            if not answered.wait(self.timeout) and not self.stopped.is_set():
                self.on_dead(f"no answer from the server within {self.timeout:g} s (keepalive)")
                return
            if not self.transport.is_active() and not self.stopped.is_set():
                self.on_dead("the connection was closed")
                return


class SSHExecutor(detached.DetachedByRun):
    """Runs commands and moves files on one node over SSH. Connects lazily (first use), reconnects
    with backoff for a new command after the connection was lost. Thread-safe: several commands
    may run at once on one connection."""

    def __init__(self, node_name: str, host: str, *, port: int = 22, user: str | None = None,
                 identity_file: str | None = None, use_agent: bool = True,
                 passphrase: PassphraseSource | None = None, known_hosts: str = "~/.ssh/known_hosts",
                 accept_new_host_keys: bool = False, connect_timeout: float = 10.0,
                 command_timeout: float | None = 600.0, keepalive: float = 5.0,
                 liveness_timeout: float | None = None, jump: SSHExecutor | None = None,
                 reconnect_attempts: int = 3, reconnect_backoff: float = 0.5) -> None:
        self._node = node_name
        self.host = host
        self.port = port
        self.user = user or _current_user()
        self.identity_file = identity_file
        self.use_agent = use_agent
        self._passphrase = passphrase or PassphraseSource()
        self.known_hosts = os.path.expanduser(known_hosts)
        self.accept_new_host_keys = accept_new_host_keys
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self.keepalive = keepalive
        self.liveness_timeout = liveness_timeout if liveness_timeout is not None else max(keepalive, 2.0)
        self.jump = jump
        self.reconnect_attempts = max(1, reconnect_attempts)
        self.reconnect_backoff = reconnect_backoff
        self._lock = threading.RLock()
        self._client: Optional[paramiko.SSHClient] = None
        self._transport: Optional[paramiko.Transport] = None
        self._sftp: Optional[paramiko.SFTPClient] = None
        self._liveness: Optional[_Liveness] = None
        self._dead_reason: Optional[str] = None
        self._ever_connected = False
        self.connect_count = 0  # how many connections were made (reconnects show here)

    def __repr__(self) -> str:
        via = f" via {self.jump.node}" if self.jump else ""
        return f"SSHExecutor({self._node!r}, {self.user}@{self.host}:{self.port}{via})"

    @property
    def node(self) -> str:
        return self._node

    @property
    def liveness_bound_s(self) -> float:
        """Upper bound on the time to notice a dead server or a cut link."""
        return self.keepalive + self.liveness_timeout

    @classmethod
    def from_inventory(cls, inventory: Inventory, node_name: str, *, accept_new_host_keys: bool = False,
                       passphrase_prompt: Callable[[str], str] | None = None,
                       _via: tuple[str, ...] = ()) -> SSHExecutor:
        """An executor for ``node_name`` with its inventory settings; ``jump`` chains are followed by
        node name (each hop verified against known_hosts like any node)."""
        try:
            node = inventory.node(node_name)
        except KeyError as exc:
            raise InputError(str(exc.args[0])) from exc

        def setting(key: str) -> object:
            return inventory.setting(node, key)

        jump = None
        if node.jump:
            if node.jump == node_name or node.jump in _via:
                chain = " -> ".join((*_via, node_name, node.jump))
                raise InputError(f"inventory: jump hosts form a loop: {chain}")
            jump = cls.from_inventory(inventory, node.jump, accept_new_host_keys=accept_new_host_keys,
                                      passphrase_prompt=passphrase_prompt, _via=(*_via, node_name))
        secret = node.passphrase or inventory.defaults.passphrase
        source = PassphraseSource(value=secret.get_secret_value if secret is not None else None,
                                  env=setting("passphrase_env"), file=setting("passphrase_file"),  # type: ignore[arg-type]
                                  prompt=passphrase_prompt)
        timeout = setting("command_timeout")
        return cls(node.name, node.host, port=int(setting("port")),  # type: ignore[call-overload]
                   user=setting("user"), identity_file=setting("identity_file"),  # type: ignore[arg-type]
                   use_agent=bool(setting("use_agent")), passphrase=source,
                   known_hosts=str(setting("known_hosts")),
                   accept_new_host_keys=bool(setting("accept_new_host_keys")) or accept_new_host_keys,
                   connect_timeout=float(setting("connect_timeout")),  # type: ignore[arg-type]
                   command_timeout=float(timeout) if timeout is not None else None,  # type: ignore[arg-type]
                   keepalive=float(setting("keepalive")), jump=jump)  # type: ignore[arg-type]

    # -- connection ----------------------------------------------------------------------------

    def connect(self) -> None:
        """Connect now (otherwise the first command does)."""
        self._connection()

    def _mark_dead(self, transport: paramiko.Transport, reason: str) -> None:
        # Only the current connection: a late report from a replaced one must not kill the new one.
        # No lock: a thread holding it may be blocked on this very connection until it is closed.
        if transport is not self._transport:
            return
        self._dead_reason = reason
        log.warning("%s: %s", self._node, reason)
        try:
            transport.close()
        except Exception:  # noqa: BLE001, S110 - already broken
            pass

    def _connection(self) -> paramiko.Transport:
        with self._lock:
            t = self._transport
            # a transport whose reader thread has ended is dead, whatever its flag says
            if t is not None and t.is_active() and t.is_alive() and self._dead_reason is None:
                return t
            self._teardown()
            attempts = self.reconnect_attempts if self._ever_connected else 1
            last: Optional[Unreachable] = None
            for attempt in range(attempts):
                if attempt:
                    time.sleep(min(self.reconnect_backoff * 2 ** (attempt - 1), 5.0))
                try:
                    return self._connect_once()
                except HostKeyError:
                    raise
                except Unreachable as exc:
                    last = exc
            assert last is not None
            raise last

    def _open_socket(self) -> socket.socket | paramiko.Channel:
        if self.jump is not None:
            via = self.jump._connection()
            try:
                return via.open_channel("direct-tcpip", (self.host, self.port), ("127.0.0.1", 0),
                                        timeout=self.connect_timeout)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise Unreachable(f"jump host {self.jump.node} could not open a connection to "
                                  f"{self.host}:{self.port}: {exc}", host=self._node) from exc
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
            # Small request/reply packets: without this, Nagle + delayed ACK add ~40 ms per command.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as exc:
            reason = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc))
            raise Unreachable(f"cannot connect to {self.host}:{self.port}: {reason}",
                              host=self._node) from exc

    def _await_banner(self, sock: object, client: paramiko.SSHClient) -> None:
        """An SSH server speaks first: a listener that stays silent (a hung sshd, a port forwarded to
        nothing, another service) is named as such instead of as a later handshake error."""
        if not isinstance(sock, socket.socket):
            return  # a channel through a jump host: paramiko's banner timeout applies
        ready, _, _ = select.select([sock], [], [], self.connect_timeout)
        if not ready:
            client.close()
            sock.close()
            raise Unreachable(f"no SSH banner from {self.host}:{self.port} within {self.connect_timeout:g} s "
                              "(the port accepts connections but no SSH server answers)", host=self._node)

    def _read_known_hosts(self) -> KnownHosts:
        if not os.path.exists(self.known_hosts):
            return KnownHosts(path=self.known_hosts)
        try:
            return read_known_hosts(self.known_hosts)
        except OSError as exc:
            raise HostKeyError(f"cannot read known_hosts {self.known_hosts}: {exc}", host=self._node) from exc

    def _connect_once(self) -> paramiko.Transport:
        pkey = load_key(self.identity_file, self._node, self._passphrase) if self.identity_file else None
        if pkey is None and not self.use_agent:
            raise Unreachable("no identity_file and use_agent is off: no way to authenticate",
                              host=self._node)
        known = self._read_known_hosts()
        sock = self._open_socket()
        client = paramiko.SSHClient()
        # paramiko gets no host keys: the policy decides on every server key, before authentication
        client.set_missing_host_key_policy(KnownHostsPolicy(self._node, self.known_hosts,
                                                            self.accept_new_host_keys, known))
        known_types = known.known_key_types(lookup_name(self.host, self.port))
        self._await_banner(sock, client)
        try:
            client.connect(self.host, port=self.port, username=self.user, pkey=pkey, sock=sock,
                           allow_agent=self.use_agent, look_for_keys=False, timeout=self.connect_timeout,
                           banner_timeout=self.connect_timeout, auth_timeout=self.connect_timeout,
                           channel_timeout=self.connect_timeout,
                           transport_factory=preferring_known_types(known_types))
        except HostKeyError:
            client.close()
            raise
        except paramiko.AuthenticationException as exc:
            client.close()
            how = f"key {self.identity_file}" if self.identity_file else "agent keys"
            raise Unreachable(f"authentication as {self.user} with {how} failed: {exc}",
                              host=self._node) from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            client.close()
            reason = str(exc) or type(exc).__name__
            raise Unreachable(f"SSH handshake with {self.host}:{self.port} failed: {reason}",
                              host=self._node) from None
        transport = client.get_transport()
        assert transport is not None
        self._client, self._transport, self._dead_reason = client, transport, None
        self._ever_connected = True
        self.connect_count += 1
        self._liveness = _Liveness(transport, self.keepalive, self.liveness_timeout,
                                   lambda reason: self._mark_dead(transport, reason), self._node)
        self._liveness.start()
        return transport

    def _teardown(self) -> None:
        if self._liveness is not None:
            self._liveness.stopped.set()
            self._liveness = None
        for closable in (self._sftp, self._client):
            if closable is not None:
                try:
                    closable.close()
                except Exception:  # noqa: BLE001, S110 - closing a broken connection
                    pass
        self._sftp = self._client = self._transport = None

    def close(self) -> None:
        with self._lock:
            self._teardown()
        if self.jump is not None:
            self.jump.close()

    def __enter__(self) -> SSHExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _lost(self, what: str, args: Sequence[str] | None, out: bytes = b"",
              err: bytes = b"") -> ConnectionLost:
        reason = self._dead_reason or "the connection closed"
        return ConnectionLost(f"connection lost during {what}: {reason}", host=self._node, command=args,
                              stdout=out.decode("utf-8", "replace"), stderr=err.decode("utf-8", "replace"))

    # -- commands ------------------------------------------------------------------------------

    def command_line(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                     cwd: str | None = None) -> str:
        """The exact line sent to the node's login shell (every user string a quoted word)."""
        args = check_argv(argv)
        if cwd is not None and (not cwd or "\0" in cwd):
            raise InputError(f"invalid working directory {cwd!r}")
        prefix = env_prefix(env)
        if prefix and "=" in args[0]:
            raise InputError(f"program name may not contain '=' when an environment is set: {args[0]!r}")
        return "exec " + shlex.join(["sh", "-c", RUN, "kvgate-run", cwd or "", *prefix, *args])

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
            timeout: float | None = None, check: bool = True, on_line: LineCallback | None = None,
            stdin: bytes | None = None) -> RunResult:
        args = check_argv(argv)
        line = self.command_line(args, env=env, cwd=cwd)
        timeout = timeout if timeout is not None else self.command_timeout
        start = time.monotonic()
        chan, transport = self._open_channel(args)
        try:
            return self._run_on(chan, transport, args, line, start, timeout, check, on_line, stdin)
        finally:
            _close_quietly(chan)

    def _open_channel(self, args: tuple[str, ...]) -> tuple[paramiko.Channel, paramiko.Transport]:
        """A session channel; when the connection turns out to be dead at this point nothing has
        been sent yet, so it is safe to reconnect (with backoff) and try once more."""
        for attempt in range(2):
            transport = self._connection()
            try:
                return transport.open_session(timeout=self.connect_timeout), transport
            except (paramiko.SSHException, OSError, EOFError) as exc:
                if not self._wait_inactive(transport, 1.0):
                    raise RemoteError(f"could not open a session channel: {exc}", host=self._node,
                                      command=args) from exc
                if attempt:
                    raise self._lost("command start", args) from exc
        raise AssertionError("unreachable")

    def _run_on(self, chan: paramiko.Channel, transport: paramiko.Transport, args: tuple[str, ...], line: str,
                start: float, timeout: float | None, check: bool, on_line: LineCallback | None,
                stdin: bytes | None) -> RunResult:
        try:
            chan.exec_command(line)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise self._lost("command start", args) from exc
        if stdin:
            feeder = threading.Thread(target=_feed, args=(chan, stdin), daemon=True, name="kvgate-stdin")
            feeder.start()
        else:
            try:
                _send_eof(chan)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise self._lost("command start", args) from exc
        streams = {"stdout": _Stream("stdout", on_line), "stderr": _Stream("stderr", on_line, strip_pid=True)}
        deadline = None if timeout is None else start + timeout
        self._pump(chan, transport, streams, args, deadline, timeout)
        for s in streams.values():
            s.finish()
            if s.callback_error is not None:
                raise s.callback_error
        code = chan.recv_exit_status()
        if code == -1:  # the server closed the channel without an exit status
            code = 255
        return checked(RunResult(host=self._node, command=args, exit_code=code, stdout=streams["stdout"].text(),
                                 stderr=streams["stderr"].text(), duration_s=time.monotonic() - start), check)

    def _pump(self, chan: paramiko.Channel, transport: paramiko.Transport, streams: dict[str, _Stream],
              args: tuple[str, ...], deadline: float | None, timeout: float | None) -> None:
        """Read both streams until the command has ended (EOF and an exit status), the connection is
        lost, or the deadline passes (the process group is killed)."""
        fd = chan.fileno()
        try:
            while True:
                self._read_ready(chan, streams, args)
                broken = self._dead_reason is not None or not transport.is_active()
                ended = chan.eof_received or chan.closed
                if ended and not chan.recv_ready() and not chan.recv_stderr_ready():
                    # exit-status may come before the last output, so the end is EOF *and* a status
                    if _has_status(chan):
                        break
                    if chan.closed and not broken:
                        # Closed without a status: either the connection is going down (paramiko
                        # closes channels first) or the server gave up on the channel.
                        gone = self._wait_inactive(transport, 1.0)
                        if not gone:
                            break  # exit code 255 below
                        broken = True
                    if not broken and chan.status_event.wait(0.2) and _has_status(chan):
                        continue
                if broken:
                    raise self._lost("a command", args, streams["stdout"].data, streams["stderr"].data)
                wait = 0.5
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise self._timed_out(chan, streams, args, timeout)
                    wait = min(wait, left)
                select.select([fd], [], [], wait)
        except KeyboardInterrupt:
            self._kill_group(streams["stderr"].pid)
            raise

    def _timed_out(self, chan: paramiko.Channel, streams: dict[str, _Stream], args: tuple[str, ...],
                   timeout: float | None) -> CommandTimeout:
        pgid = self._group_of(chan, streams, args)
        if pgid is None:
            what = "its process group was never reported: nothing killed"
        else:
            self._kill_group(pgid)
            what = f"process group {pgid} killed"
        return CommandTimeout(f"command timed out after {timeout:g} s ({what})", host=self._node, command=args,
                              stdout=streams["stdout"].text(), stderr=streams["stderr"].text())

    def _group_of(self, chan: paramiko.Channel, streams: dict[str, _Stream], args: tuple[str, ...]) -> int | None:
        """The command's process group. On a loaded node the deadline can pass before the wrapper's
        report has arrived; closing the channel then would leave a command that has started running
        (it need not write again, and may ignore the hangup), so the report is awaited for a bounded
        grace and that group is killed."""
        stderr = streams["stderr"]
        end = time.monotonic() + PID_GRACE_S
        while stderr.pid_pending and time.monotonic() < end:
            self._read_ready(chan, streams, args)
            if not stderr.pid_pending or chan.closed or (chan.eof_received and not chan.recv_stderr_ready()):
                break
            select.select([chan.fileno()], [], [], min(0.2, max(0.0, end - time.monotonic())))
        return stderr.pid

    def _read_ready(self, chan: paramiko.Channel, streams: dict[str, _Stream], args: tuple[str, ...]) -> None:
        """Feed whatever both streams hold now; past the output limit the command is killed."""
        while chan.recv_ready():
            streams["stdout"].feed(chan.recv(65536))
        while chan.recv_stderr_ready():
            streams["stderr"].feed(chan.recv_stderr(65536))
        self._check_overflow(streams, args)

    def _check_overflow(self, streams: dict[str, _Stream], args: tuple[str, ...]) -> None:
        for name, s in streams.items():
            if s.overflow:
                self._kill_group(streams["stderr"].pid)
                raise OutputTooLarge(
                    f"the command wrote more than the {MAX_OUTPUT_BYTES} byte limit on {name} (process group "
                    f"{streams['stderr'].pid or '?'} killed)", host=self._node, command=args,
                    stdout=streams["stdout"].text()[-2000:], stderr=streams["stderr"].text()[-2000:])

    def _wait_inactive(self, transport: paramiko.Transport, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self._dead_reason is not None or not transport.is_active() or not transport.is_alive():
                return True
            time.sleep(0.02)
        return False

    def _kill_group(self, pgid: int | None) -> None:
        if pgid is None or pgid <= 1:
            return
        try:
            self.run(["sh", "-c", KILL_GROUP, "kvgate-kill", str(pgid)], timeout=15.0, check=False)
        except RemoteError as exc:
            log.warning("%s: could not kill process group %s after a timeout: %s", self._node, pgid, exc)

    # -- files ---------------------------------------------------------------------------------

    def _sftp_client(self) -> paramiko.SFTPClient:
        with self._lock:
            self._connection()
            if self._sftp is None:
                assert self._client is not None
                try:
                    self._sftp = self._client.open_sftp()
                except (paramiko.SSHException, OSError, EOFError) as exc:
                    raise TransferError(f"cannot start SFTP: {exc}", host=self._node) from exc
                channel = self._sftp.get_channel()
                if channel is not None and self.command_timeout is not None:
                    channel.settimeout(self.command_timeout)
            return self._sftp

    def _file_error(self, exc: BaseException, what: str, path: str) -> RemoteError:
        if isinstance(exc, FileNotFoundError) or getattr(exc, "errno", None) == 2:
            return RemoteFileNotFound(f"{what}: no such file: {path}", host=self._node)
        if self._dead_reason is not None or isinstance(exc, (EOFError, paramiko.SSHException,
                                                             socket.timeout)):
            with self._lock:
                self._sftp = None
            return self._lost(f"{what} of {path}", None)
        return TransferError(f"{what} of {path} failed: {exc}", host=self._node)

    def remote_sha256(self, remote_path: str) -> str:
        res = self.run(["sh", "-c", SHA256, "kvgate-sha256", remote_path], timeout=self.command_timeout,
                       check=False)
        words = res.stdout.split()
        if res.exit_code != 0 or not words:
            raise TransferError(f"cannot compute the sha256 of {remote_path}", host=self._node,
                                exit_code=res.exit_code, stderr=res.stderr)
        return words[0].lstrip("\\")

    def put(self, local_path: str, remote_path: str, *, mode: int | None = None) -> None:
        want = sha256_file(local_path)
        tmp = f"{remote_path}.kvgate-{uuid.uuid4().hex[:12]}.tmp"
        sftp = self._sftp_client()
        try:
            sftp.put(local_path, tmp)
            if mode is not None:
                sftp.chmod(tmp, mode)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            _quiet_remove(sftp, tmp)
            raise self._file_error(exc, "put", remote_path) from exc
        got = self.remote_sha256(tmp)
        if got != want:
            _quiet_remove(sftp, tmp)
            raise TransferError(f"put {local_path} -> {remote_path}: checksum mismatch "
                                f"(sha256 {want} sent, {got} received)", host=self._node)
        try:
            sftp.posix_rename(tmp, remote_path)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            _quiet_remove(sftp, tmp)
            raise self._file_error(exc, "put", remote_path) from exc

    def get(self, remote_path: str, local_path: str) -> None:
        want = self.remote_sha256(remote_path) if self._exists(remote_path) else None
        if want is None:
            raise RemoteFileNotFound(f"get: no such file: {remote_path}", host=self._node)
        tmp = f"{local_path}.kvgate-{uuid.uuid4().hex[:12]}.tmp"
        try:
            self._sftp_client().get(remote_path, tmp)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            _quiet_unlink(tmp)
            raise self._file_error(exc, "get", remote_path) from exc
        got = sha256_file(tmp)
        if got != want:
            _quiet_unlink(tmp)
            raise TransferError(f"get {remote_path} -> {local_path}: checksum mismatch "
                                f"(sha256 {want} on the node, {got} received)", host=self._node)
        os.replace(tmp, local_path)

    def _exists(self, remote_path: str) -> bool:
        try:
            self._sftp_client().stat(remote_path)
            return True
        except (OSError, EOFError, paramiko.SSHException) as exc:
            err = self._file_error(exc, "stat", remote_path)
            if isinstance(err, RemoteFileNotFound):
                return False
            raise err from exc

    def read_file(self, remote_path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        try:
            with self._sftp_client().open(remote_path, "rb") as fh:
                data = fh.read(max_bytes + 1)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise self._file_error(exc, "read", remote_path) from exc
        if len(data) > max_bytes:
            raise TransferError(f"{remote_path} is larger than {max_bytes} bytes", host=self._node)
        return bytes(data)

    def write_file(self, remote_path: str, data: bytes, *, mode: int | None = None) -> None:
        sftp = self._sftp_client()
        tmp = f"{remote_path}.kvgate-{uuid.uuid4().hex[:12]}.tmp"
        try:
            with sftp.open(tmp, "wb") as fh:
                fh.write(data)
            sftp.chmod(tmp, mode if mode is not None else 0o644)
            sftp.posix_rename(tmp, remote_path)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            _quiet_remove(sftp, tmp)
            raise self._file_error(exc, "write", remote_path) from exc

    def which(self, tool: str) -> str | None:
        if not tool or "/" in tool or "\0" in tool:
            return None
        res = self.run(["sh", "-c", WHICH, "kvgate-which", tool], check=False, timeout=30.0)
        path = res.stdout.strip()
        return path if res.exit_code == 0 and path.startswith("/") and "\n" not in path else None

    # detached processes: start_detached, poll, stop, tail_log from detached.DetachedByRun


class _Stream:
    """Collects one output stream, splits it into lines for the callback, and (stderr) strips the
    process-group line our wrapper prints first."""

    def __init__(self, name: str, on_line: LineCallback | None, *, strip_pid: bool = False) -> None:
        self.name = name
        self.on_line = on_line
        self.buf = bytearray()
        self._partial = b""
        self._head: Optional[bytearray] = bytearray() if strip_pid else None
        self.pid: Optional[int] = None
        self.callback_error: Optional[BaseException] = None
        self.overflow = False

    @property
    def data(self) -> bytes:
        return bytes(self.buf)

    @property
    def pid_pending(self) -> bool:
        """The wrapper's process-group line has not arrived in full yet."""
        return self._head is not None

    def feed(self, chunk: bytes) -> None:
        if not chunk or self.overflow:
            return
        if len(self.buf) + len(chunk) + len(self._head or b"") > MAX_OUTPUT_BYTES:
            self.overflow = True  # the caller kills the command
            return
        if self._head is not None:
            self._head += chunk
            nl = self._head.find(b"\n")
            if nl < 0:
                return
            first, rest = bytes(self._head[:nl]), bytes(self._head[nl + 1:])
            self._head = None
            if first.startswith(_PID_PREFIX) and first[len(_PID_PREFIX):].isdigit():
                self.pid = int(first[len(_PID_PREFIX):])
                chunk = rest
            else:
                chunk = first + b"\n" + rest
        self.buf += chunk
        if self.on_line is not None:
            lines = (self._partial + chunk).split(b"\n")
            self._partial = lines.pop()
            for raw in lines:
                self._emit(raw)
            while len(self._partial) > MAX_CALLBACK_LINE:  # a line with no end: passed on in pieces
                self._emit(self._partial[:MAX_CALLBACK_LINE])
                self._partial = self._partial[MAX_CALLBACK_LINE:]

    def _emit(self, raw: bytes) -> None:
        if self.on_line is None or self.callback_error is not None:
            return
        try:
            self.on_line(self.name, raw.decode("utf-8", "replace").rstrip("\r"))
        except BaseException as exc:  # noqa: BLE001 - reported after the command ends
            self.callback_error = exc

    def finish(self) -> None:
        if self._head:  # never saw a newline: it was not our header
            self.buf += self._head
            self._partial += bytes(self._head)
            self._head = None
        if self._partial:
            self._emit(self._partial)
            self._partial = b""

    def text(self) -> str:
        data = self.buf if self._head is None else self.buf + self._head
        return bytes(data).decode("utf-8", "replace")


def _has_status(chan: paramiko.Channel) -> bool:
    # Not exit_status_ready(): that is also true once the channel is closed without a status.
    return chan.status_event.is_set() and chan.exit_status != -1


def _feed(chan: paramiko.Channel, data: bytes) -> None:
    try:
        chan.sendall(data)
        _send_eof(chan)
    except (OSError, EOFError, paramiko.SSHException):
        pass


def _close_quietly(chan: paramiko.Channel) -> None:
    """Close a command's channel; on a connection already lost paramiko raises EOFError here, which
    would replace the ConnectionLost that says what happened."""
    try:
        chan.close()
    except (OSError, EOFError, paramiko.SSHException):
        pass


def _send_eof(chan: paramiko.Channel) -> None:
    """The end of the command's stdin, never after the channel is closed. paramiko's
    ``shutdown_write`` builds the EOF under the channel's lock but sends it after releasing it: a
    command that ends at once (``echo``) lets paramiko's transport thread answer the server's CLOSE
    in between, and an EOF that follows our CLOSE names a channel OpenSSH has already freed, which
    it answers by dropping the whole connection, every command on it ("ieof packet referred to
    nonexistent channel" in sshd's log; 3 of 8 concurrent commands lost beside a CPU hog). Sent
    under the lock, it goes out before any CLOSE: the transport thread needs that lock to close."""
    with chan.lock:
        if chan.closed or chan.transport is None:
            return
        msg = chan._send_eof()  # type: ignore[attr-defined]  # noqa: SLF001 - paramiko's own EOF message
        if msg is not None:
            chan.transport._send_user_message(msg)  # type: ignore[attr-defined]  # noqa: SLF001


def _quiet_remove(sftp: paramiko.SFTPClient, path: str) -> None:
    try:
        remove_name_with(sftp.remove, path, marker=".kvgate-")
    except Exception:  # noqa: BLE001, S110 - best effort clean-up of a temp file
        pass


def _quiet_unlink(path: str) -> None:
    try:
        remove_file(path, within=os.path.dirname(os.path.abspath(path)), marker=".kvgate-")
    except OSError:
        pass


def _current_user() -> str:
    import getpass

    return getpass.getuser()


__all__ = ["SSHExecutor"]
