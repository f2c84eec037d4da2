"""No line of a log can be forged by what others send (issue 15, defect 6): a run id with a
newline, echoed by a database error's detail, used to start a line of the worker's log."""

import logging
import logging.config
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.db import IntegrityError, transaction

from reviewapp.infra.logs import SafeFormatter, confine, escape_controls
from reviewapp.models import Run
from tests.paths import ROOT

FORGED = "[2026-01-01 00:00:00,000: ERROR/MainProcess] FORGED admin signed in"
EVIL_RUN = f"run-1\n{FORGED}\r\x1b[2J"


def forged(output: str) -> bool:
    return any(line.startswith(("[2026-01-01", "FORGED")) for line in output.splitlines())


def database_error_quoting(run_id: str) -> IntegrityError:
    Run.objects.create(run_id=run_id, started_at="2026-01-01T00:00:00Z")
    try:
        with transaction.atomic():
            Run.objects.bulk_create([Run(run_id=run_id, started_at="2026-01-01T00:00:00Z")])
    except IntegrityError as exc:
        return exc
    raise AssertionError("no error")


@pytest.mark.django_db
def test_a_database_error_quoting_a_run_id_stays_in_its_record(capsys):
    error = database_error_quoting(EVIL_RUN)
    assert FORGED in str(error.__cause__)  # PostgreSQL's detail quotes the value as it is
    logging.config.dictConfig(settings.LOGGING)
    try:
        raise RuntimeError("batch 7 failed") from error
    except RuntimeError:
        logging.getLogger("reviewapp.ingest.pipeline").exception("batch %s: %s", 7, EVIL_RUN)
    output = capsys.readouterr().err
    assert "FORGED" in output
    assert not forged(output), output
    assert "\r" not in output and "\x1b" not in output
    # Each line after a record's first is indented: nothing sent can begin one.
    assert all(line.startswith("    ") for line in output.splitlines()[1:])


def test_the_celery_worker_log_escapes_what_tasks_log():
    script = (
        "import django, logging; django.setup()\n"
        "from reviewapp.celery import app\n"
        "app.log.setup_logging_subsystem(loglevel='INFO', colorize=False)\n"
        "from celery.utils.log import get_task_logger\n"
        f"logging.getLogger('reviewapp.ingest.pipeline').warning('batch 1: %s', {EVIL_RUN!r})\n"
        f"get_task_logger('reviewapp.tasks').error('task: %s', {EVIL_RUN!r})\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = done.stdout + done.stderr
    assert output.count("FORGED") == 2, output
    assert not forged(output), output


def test_escaping_and_confining():
    assert escape_controls("a\nb\r\x00\x7f\u2028\tc") == "a\\nb\\r\\x00\\x7f\\u2028\tc"
    assert confine("head\nTraceback\n  File x\nValueError: a\rb") == (
        "head\n    Traceback\n      File x\n    ValueError: a\\rb"
    )
    record = logging.LogRecord("x", logging.ERROR, "f", 1, "run %s", (EVIL_RUN,), None)
    assert "\n" not in SafeFormatter("%(message)s").format(record)
