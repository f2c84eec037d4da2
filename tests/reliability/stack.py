"""A live Crosscheck stack for fault tests: its own Redis (so that a test may kill it),
gunicorn, a Celery worker and beat, all on the test database, each a real process in its
own process group, so that a test can SIGKILL exactly what it means to."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The production worker's flags (docker-compose.yml, scripts/run): gossip and mingle only
# add broker traffic, and gossip's restart after a broker outage is where workers died.
WORKER_ARGS = ["worker", "--without-gossip", "--without-mingle", "--loglevel=INFO"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@dataclass
class Process:
    name: str
    args: list[str]
    env: dict[str, str]
    log: Path
    popen: subprocess.Popen | None = None

    def start(self) -> Process:
        handle = self.log.open("ab")
        self.popen = subprocess.Popen(
            self.args,
            cwd=ROOT,
            env=self.env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        handle.close()
        return self

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive:
            os.killpg(self.popen.pid, sig)
            self.popen.wait(timeout=30)

    def stop(self) -> None:
        if not self.alive:
            return
        os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class Stack:
    """Start with start(); every process is replaceable by name (start_<name>)."""

    database_url: str
    workdir: Path
    redis_port: int = field(default_factory=free_port)
    web_port: int = field(default_factory=free_port)
    overrides: dict[str, str] = field(default_factory=dict)
    processes: dict[str, Process] = field(default_factory=dict)
    # How the worker is started: celery's own entry point, or a module that wraps it (a
    # test's fault injected into the worker only, see test_poison.py).
    worker_entry: list[str] = field(default_factory=lambda: ["-m", "celery"])

    @property
    def env(self) -> dict[str, str]:
        redis = f"redis://127.0.0.1:{self.redis_port}"
        return {
            **os.environ,
            "DATABASE_URL": self.database_url,
            "REDIS_URL": f"{redis}/0",
            "CACHE_URL": f"{redis}/1",
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "CROSSCHECK_VAR_DIR": str(self.workdir / "var"),
            "UPLOAD_DIR": os.environ.get("UPLOAD_DIR", str(self.workdir / "uploads")),
            "PYTHONUNBUFFERED": "1",
            **self.overrides,
        }

    def _run(self, name: str, args: list[str]) -> Process:
        process = Process(name, args, self.env, self.workdir / f"{name}.log").start()
        self.processes[name] = process
        return process

    def start_redis(self) -> Process:
        process = self._run(
            "redis",
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.redis_port)]
            + ["--save", "", "--appendonly", "yes", "--dir", str(self.workdir)],
        )
        wait_for(lambda: _answers(self.redis_port), 15, "Redis")
        return process

    def start_web(self) -> Process:
        process = self._run(
            "web",
            [sys.executable, "-m", "gunicorn", "reviewapp.wsgi", "-b", f"127.0.0.1:{self.web_port}"]
            + ["-w", "2", "--no-control-socket", "--timeout", "60"],
        )
        wait_for(lambda: self.status("/login/") == 200, 30, "gunicorn")
        return process

    def start_worker(self, concurrency: int = 2) -> Process:
        process = self._run(
            "worker",
            [sys.executable, *self.worker_entry, "-A", "reviewapp.celery", *WORKER_ARGS]
            + [f"--concurrency={concurrency}"],
        )
        wait_for(lambda: "ready" in process.text() or not process.alive, 60, "the worker")
        assert process.alive, process.text()
        return process

    def pool(self) -> list[int]:
        """The worker's pool processes (prefork children), which run the tasks."""
        worker = self.processes["worker"]
        return children(worker.popen.pid) if worker.alive else []

    def start_beat(self) -> Process:
        return self._run(
            "beat",
            [sys.executable, "-m", "celery", "-A", "reviewapp.celery", "beat", "--loglevel=INFO"]
            + ["--schedule", str(self.workdir / "beat-schedule")],
        )

    def start(self, *, beat: bool = True) -> Stack:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.start_redis()
        self.start_web()
        self.start_worker()
        if beat:
            self.start_beat()
        return self

    def stop(self) -> None:
        for process in reversed(list(self.processes.values())):
            process.stop()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.web_port}{path}"

    def status(self, path: str, **kwargs) -> int:
        try:
            return self.request(path, **kwargs).status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return 0

    def request(self, path: str, *, data: bytes | None = None, headers=None, opener=None):
        request = urllib.request.Request(
            self.url(path), data=data, headers={"Host": "localhost", **(headers or {})}
        )
        return (opener or urllib.request.build_opener()).open(request, timeout=30)


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (a worker's pool, a server's backends)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False
