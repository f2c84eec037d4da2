"""Real Celery workers for the tests that need one: a process on the test database (its
name is only known once pytest-django has made it) and the test Redis."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.db import connection

from tests.paths import ROOT


def wait_for(predicate, timeout: float, message: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


@contextmanager
def celery_worker(
    django_db_blocker, log_path: Path, *, concurrency: int, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen]:
    """A worker with `concurrency` pool processes, its log in `log_path`, `env` added to
    this process's environment; stopped (its whole process group) at the end."""
    assert os.environ.get("REDIS_URL"), (
        "these tests need a real Redis: run them through scripts/test"
    )
    with django_db_blocker.unblock():
        database = connection.settings_dict["NAME"]
    base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    environment = {
        **os.environ,
        "DATABASE_URL": f"{base}/{database}",
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        **(env or {}),
    }
    command = [sys.executable, "-m", "celery", "-A", "reviewapp.celery", "worker"]
    command += [f"--concurrency={concurrency}", "--loglevel=INFO"]
    command += ["--without-gossip", "--without-mingle"]
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_for(
                lambda: "ready" in log_path.read_text() or process.poll() is not None,
                60,
                "the worker to start",
            )
            assert process.poll() is None, log_path.read_text()
            yield process
        finally:
            stop_group(process)


def stop_group(process: subprocess.Popen) -> None:
    """Stop a process started in a session of its own, and its children: SIGTERM, then
    SIGKILL if it has not ended within 20 s."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
