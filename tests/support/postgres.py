"""A throwaway PostgreSQL server for the history tests: ``initdb`` into a temporary directory,
``pg_ctl start`` on a free loopback port (and a private unix socket directory), stopped and removed
at the end. As root the server runs as the unprivileged ``postgres`` user (PostgreSQL refuses to
run as root), through ``runuser``.

The binaries come from the ``postgresql`` package that ``tools/ensure-system-deps.sh`` installs
(Debian keeps them in ``/usr/lib/postgresql/<version>/bin``, off PATH).
"""

# ruff: noqa: S603  (fixed argv lists of the PostgreSQL tools, no user input)
from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from harness.ports import free_port


def _bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    if not candidates:
        raise RuntimeError(f"{name} not found: run `make system-deps` (tools/ensure-system-deps.sh installs "
                           "the postgresql package)")
    return candidates[0]


@dataclass
class PostgresServer:
    base: Path
    port: int
    user: str  # the OS user the server runs as
    _prefix: list[str]

    @classmethod
    def start(cls) -> PostgresServer:
        base = Path(tempfile.mkdtemp(prefix="kvgate-pg-"))
        os.chmod(base, 0o755)
        prefix: list[str] = []
        user = pwd.getpwuid(os.getuid()).pw_name
        if os.getuid() == 0:
            user = "postgres"
            shutil.chown(base, user=user)
            prefix = ["runuser", "-u", user, "--"]
        data = base / "data"
        sock = base / "sock"
        subprocess.run(prefix + ["mkdir", "-p", str(sock)], check=True)
        subprocess.run(prefix + [_bin("initdb"), "-D", str(data), "-U", "kvgate", "--auth=trust", "-E", "UTF8",
                                 "--no-sync"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        port = free_port()
        opts = f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
        subprocess.run(prefix + [_bin("pg_ctl"), "-D", str(data), "-l", str(base / "server.log"), "-o", opts,
                                 "-w", "-t", "60", "start"], check=True, stdout=subprocess.DEVNULL)
        server = cls(base, port, user, prefix)
        server._wait()
        return server

    def _wait(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"PostgreSQL did not listen on 127.0.0.1:{self.port}; log: {self.log()}")

    def log(self) -> str:
        try:
            return (self.base / "server.log").read_text()[-4000:]
        except OSError:
            return ""

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://kvgate@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=kvgate dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        subprocess.run(self._prefix + [_bin("pg_ctl"), "-D", str(self.base / "data"), "-m", "fast", "-w", "stop"],
                       check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.base, ignore_errors=True)
