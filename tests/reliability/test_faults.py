"""The fault matrix (../shared/research/reliability-anchors.md §7) against a live stack:
every line stored exactly once, recovery within a minute. A bounded set always runs; the
slow variants (repeated kills, longer outages) with CROSSCHECK_SLOW=1 (scripts/test)."""

from __future__ import annotations

import os

import pytest

from reviewapp.ingest.tokens import create_token
from tests.reliability import scenarios
from tests.reliability.postgres import Postgres, pg_bin
from tests.reliability.stack import Stack

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def intact(result: scenarios.Outcome) -> None:
    assert (result.lost, result.duplicated, result.state) == (0, 0, "done"), result
    assert result.recovery_seconds < 60, result


@pytest.fixture
def token(reviewer) -> str:
    return create_token(user=reviewer, name="faults")[1]


def test_a_pool_process_killed_mid_batch(stack, token):
    intact(scenarios.pool_process_killed(stack, token))
    assert stack.processes["worker"].alive


@pytest.mark.slow
def test_pool_processes_killed_again_and_again(stack, token):
    for round_ in range(5):
        intact(scenarios.pool_process_killed(stack, token, prefix=f"pool{round_}"))


def test_redis_frozen_mid_batch_then_thawed(stack, token, desk):
    result, statuses = scenarios.redis_frozen(
        stack, token, frozen=10, pages=["/login/", "/api/v1/openapi.json"]
    )
    intact(result)
    assert all(status == 200 for status in statuses), statuses


@pytest.mark.slow
def test_redis_frozen_for_half_a_minute(stack, token):
    intact(scenarios.redis_frozen(stack, token, frozen=30)[0])


@pytest.mark.slow
def test_redis_killed_and_restarted_repeatedly(stack, token):
    for round_ in range(3):
        intact(scenarios.redis_killed(stack, token, prefix=f"redis{round_}"))


@pytest.fixture
def own_postgres(tmp_path):
    """A PostgreSQL of the test's own, which it may kill, with a stack on it."""
    if pg_bin() is None:
        pytest.skip("no PostgreSQL server binaries")
    postgres = Postgres().create()
    stack = Stack(
        database_url=postgres.app_url,
        workdir=tmp_path / "stack",
        overrides={"MIGRATE_DATABASE_URL": ""},
    )
    try:
        yield postgres, stack.start()
    finally:
        stack.stop()
        postgres.remove()


def _token_on(stack: Stack) -> str:
    """A reviewer and an API token, made on the stack's own database."""
    import subprocess
    import sys

    from tests.paths import ROOT

    script = (
        "from reviewapp.accounts.roles import account_role_set\n"
        "from reviewapp.ingest.tokens import create_token\n"
        "user = account_role_set('faults', 'reviewer', password='pw-faults-123')\n"
        "print(create_token(user=user, name='faults')[1])\n"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-v", "0", "-c", script],
        cwd=ROOT,
        env={**stack.env, "DJANGO_SETTINGS_MODULE": "reviewapp.settings"},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout.strip().splitlines()[-1]


def test_postgresql_killed_mid_batch(own_postgres):
    postgres, stack = own_postgres
    intact(scenarios.postgres_killed(stack, _token_on(stack), postgres))
    assert stack.processes["worker"].alive and stack.processes["web"].alive
    assert stack.status("/login/") == 200


def test_a_poison_batch_is_failed_after_its_tries_not_delivered_for_ever(
    tmp_path, token, stack_factory
):
    stack = stack_factory(worker_entry=["-m", "tests.reliability.poison_worker"])
    result = scenarios.poison(stack, token, max_attempts=3)
    assert (result.state, result.attempts) == ("failed", 3)
    assert "Unrecoverable" not in stack.processes["worker"].text()
    # The worker still takes other work.
    again = scenarios.trace_body(2, "after-poison")
    public_id = scenarios.post(stack, again, token)
    assert scenarios.outcome(stack, "after", public_id, again.count(b"\n"), 0).state == "done"


@pytest.fixture
def stack_factory(django_db_blocker, tmp_path):
    from django.db import connection

    made = []

    def make(**kwargs) -> Stack:
        with django_db_blocker.unblock():
            database = connection.settings_dict["NAME"]
        base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
        live = Stack(
            database_url=f"{base}/{database}",
            workdir=tmp_path / f"stack{len(made)}",
            **kwargs,
        )
        made.append(live)
        return live.start()

    yield make
    for live in made:
        live.stop()
