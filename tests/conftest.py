"""Shared fixtures: users in each role, a small review desk, an empty cache; the database
roles tests run as (tests/roles.py); slow tests only with CROSSCHECK_SLOW=1."""

import os

import pgtrigger
import pytest
from django.core.cache import cache
from django.core.management.commands import flush
from django.db import connections

from reviewapp.accounts.roles import ADMIN, APPROVER, REVIEWER, VIEWER, ensure_roles
from reviewapp.infra.roles import as_owner
from tests.roles import (
    CREDENTIALS,
    become,
    owner_settings,
    people_set_up_before_install,
    person_set_up_before,
    separate,
)

SLOW = os.environ.get("CROSSCHECK_SLOW") == "1"


def pytest_collection_modifyitems(config, items):
    """Tests marked slow (long fault variants) run only with CROSSCHECK_SLOW=1; each kind of
    fault also has a bounded test that always runs."""
    if SLOW:
        return
    slow = [item for item in items if "slow" in item.keywords]
    if slow:
        # Left out of the run (deselected, as -m would), not skipped: nothing here is a test
        # that was meant to run and did not.
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if "slow" not in item.keywords]


def make_user(django_user_model, username: str, role: str | None):
    ensure_roles()
    return person_set_up_before(django_user_model, username, f"pw-{username}-123", role)


@pytest.fixture
def viewer(django_user_model):
    return make_user(django_user_model, "vera", VIEWER)


@pytest.fixture
def reviewer(django_user_model):
    return make_user(django_user_model, "rita", REVIEWER)


@pytest.fixture
def second_reviewer(django_user_model):
    return make_user(django_user_model, "ravi", REVIEWER)


@pytest.fixture
def approver(django_user_model):
    return make_user(django_user_model, "abel", APPROVER)


@pytest.fixture
def admin_user(django_user_model):
    return make_user(django_user_model, "ada", ADMIN)


@pytest.fixture(autouse=True)
def fresh_cache():
    """Pages cache fragments per process; no test may see another's."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(scope="module")
def browser():
    """Real headless Chromium, one per test module (tests/browser.py)."""
    from tests.browser import chromium

    with chromium() as browser:
        yield browser


@pytest.fixture
def desk(tmp_path):
    """Conflict tickets of a small ingested trace, by run id."""
    from reviewapp.models import Ticket
    from tests.seeding import ingest_lines, review_desk_trace

    ingest_lines(tmp_path, review_desk_trace())
    return {t.run.run_id: t for t in Ticket.objects.filter(kind="conflict").select_related("run")}


_APP_CREDENTIALS: dict = {}


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """The test database is made and migrated by the owner of the tables, as production's
    is: the app's role may not create a database, nor a table (tests/roles.py)."""
    if separate():
        default = connections["default"]
        _APP_CREDENTIALS.update({key: default.settings_dict.get(key) for key in CREDENTIALS})
        become(default, owner_settings())


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """Then every test runs as the app's role, which owns nothing (the people tests act as
    are set up by the owner: tests/roles.py); the owner drops the database at the end."""
    if not separate():
        yield
        return
    with django_db_blocker.unblock():
        people_set_up_before_install(connections["default"], _APP_CREDENTIALS["USER"])
        become(connections["default"], _APP_CREDENTIALS)
    yield
    with django_db_blocker.unblock():
        become(connections["default"], owner_settings())


@pytest.fixture(autouse=True, scope="session")
def flush_past_the_append_only_guards():
    """Between transactional tests the test database is emptied by TRUNCATE, which the
    app's role may not do and the append-only guards refuse unless told otherwise:
    emptying it is deliberate maintenance, by the owner of the tables."""
    handle = flush.Command.handle

    def handle_ignoring_guards(self, *args, **options):
        with as_owner(options.get("database") or "default"), pgtrigger.ignore():
            return handle(self, *args, **options)

    flush.Command.handle = handle_ignoring_guards
    yield
    flush.Command.handle = handle
