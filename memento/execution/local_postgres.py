"""A throwaway PostgreSQL server on 127.0.0.1 for tests, benchmarks and trying a shared memory on one machine.

:class:`LocalPostgres` runs the server binaries of the installed PostgreSQL (Debian's ``postgresql`` package puts
them in ``/usr/lib/postgresql/<version>/bin``, not on PATH; ``MEMENTO_PG_BIN`` names another directory): ``initdb``
with trust authentication into a data directory, then ``pg_ctl start`` listening on 127.0.0.1 only, with its socket
in the same directory. PostgreSQL refuses to run as root, so as root both run as the ``postgres`` user (``runuser``)
and the data directory is made reachable by that user. Nothing is durable on purpose (``fsync=off``): it is a
scratch server. A memory then lives at ``postgresql://postgres@127.0.0.1:<port>/<database>``.

From a shell (prints the location to give ``--memory``)::

    python -m memento.execution.local_postgres start /tmp/memento-pg     # initdb once, start, create database "memento"
    python -m memento.execution.local_postgres stop /tmp/memento-pg

Example:
    >>> from memento.execution.local_postgres import LocalPostgres
    >>> server = LocalPostgres("/tmp/memento-pg")  # doctest: +SKIP
    >>> server.start(); server.create_database("team")  # doctest: +SKIP
    'postgresql://postgres@127.0.0.1:54329/team'
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from memento.core.errors import ConfigError

__all__ = ["LocalPostgres", "find_bin_dir", "main"]

_USER = "postgres"  # the database superuser initdb creates, and the OS user the server runs as under root


def find_bin_dir() -> Path | None:
    """The directory of ``initdb``/``pg_ctl``: ``MEMENTO_PG_BIN``, the newest ``/usr/lib/postgresql/*/bin``, or PATH."""
    env = os.environ.get("MEMENTO_PG_BIN")
    if env:
        return Path(env) if (Path(env) / "pg_ctl").exists() else None
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    for candidate in reversed(versions):
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalPostgres:
    """A scratch PostgreSQL server in ``root`` (data in ``root/data``, socket and log beside it).

    Args:
        root: A directory for the server's files (created; as root it is opened to the ``postgres`` user, so keep
            it outside a 0700 directory such as pytest's temporary folders).
        port: The TCP port on 127.0.0.1 (default: a free one, remembered in ``root/port`` for ``stop``).
    """

    def __init__(self, root: str | os.PathLike[str], *, port: int | None = None) -> None:
        self.root = Path(root).resolve()
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        saved = self.root / "port"
        self.port = port or (int(saved.read_text()) if saved.exists() else _free_port())
        bin_dir = find_bin_dir()
        if bin_dir is None:
            raise ConfigError(
                "PostgreSQL server binaries not found: install them (Debian: apt-get install postgresql) "
                "or set MEMENTO_PG_BIN to the directory holding initdb and pg_ctl"
            )
        self.bin = bin_dir
        self._as_root = os.geteuid() == 0

    # -- running the binaries ------------------------------------------------------------------------------------
    def _run(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / args[0]), *args[1:]]
        if self._as_root:  # initdb and postgres refuse to run as root
            command = ["runuser", "-u", _USER, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)

    def _prepare_root(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self._as_root:
            import pwd

            user = pwd.getpwnam(_USER)
            for path in (self.root, *self.root.parents):  # the server user must traverse every parent
                if path == Path("/"):
                    break
                mode = path.stat().st_mode
                if not mode & 0o001:
                    os.chmod(path, mode | 0o011 if path != self.root else 0o755)
            os.chown(self.root, user.pw_uid, user.pw_gid)

    @property
    def running(self) -> bool:
        """Whether the server answers on its port."""
        return self._run("pg_ctl", "status", "-D", str(self.data), timeout=30).returncode == 0

    def start(self) -> LocalPostgres:
        """Create the cluster when missing and start the server (a running one is left as it is). Returns self.

        Raises:
            ConfigError: initdb or the server failed (one line, with the end of the server's log).
        """
        self._prepare_root()
        if not (self.data / "PG_VERSION").exists():
            done = self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", _USER, "-E", "UTF8", "--no-sync")
            if done.returncode != 0:
                raise ConfigError(f"initdb failed: {_last_line(done.stderr or done.stdout)}")
        if self.running:
            return self
        options = (
            f"-k {self.root} -p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=200 -c shared_buffers=64MB"
        )
        done = self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log), "-o", options)
        if done.returncode != 0:
            tail = self.log.read_text(errors="replace") if self.log.exists() else done.stderr
            raise ConfigError(f"PostgreSQL did not start on port {self.port}: {_last_line(tail)}")
        (self.root / "port").write_text(str(self.port))
        return self

    def stop(self) -> None:
        """Stop the server (fast shutdown); nothing happens when it is not running."""
        if self.data.exists():
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w", timeout=60)

    def destroy(self) -> None:
        """Stop the server and delete its files."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- databases -----------------------------------------------------------------------------------------------
    def dsn(self, database: str = "postgres") -> str:
        """The location of a database of this server (``postgresql://postgres@127.0.0.1:PORT/DB``)."""
        return f"postgresql://{_USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create database ``name`` (when missing) and return its location."""
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
            raise ConfigError(f"database name {name!r}: use lower-case letters, digits and _")
        import psycopg

        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(self.dsn(), autocommit=True, connect_timeout=10) as conn:
                    if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                        conn.execute(f'CREATE DATABASE "{name}"')
                return self.dsn(name)
            except psycopg.OperationalError:
                if time.monotonic() > deadline:  # the server is still starting up
                    raise
                time.sleep(0.2)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def main(argv: list[str] | None = None) -> int:
    """``python -m memento.execution.local_postgres start|stop|destroy DIR [--port N] [--database NAME]``."""
    parser = argparse.ArgumentParser(
        prog="python -m memento.execution.local_postgres", description=__doc__.split("\n")[0]
    )
    parser.add_argument("action", choices=("start", "stop", "destroy"))
    parser.add_argument("root", help="directory for the server's files (outside a 0700 folder when run as root)")
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--database", default="memento", help="database to create on start (default: memento)")
    args = parser.parse_args(argv)
    try:
        server = LocalPostgres(args.root, port=args.port)
        if args.action == "start":
            server.start()
            print(server.create_database(args.database))
        elif args.action == "stop":
            server.stop()
        else:
            server.destroy()
    except ConfigError as exc:
        print(f"memento: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
