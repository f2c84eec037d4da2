"""Shared fixtures: users in each role, a small review desk, an empty cache."""

import pgtrigger
import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.core.management.commands import flush

from reviewapp.accounts.roles import ADMIN, APPROVER, REVIEWER, VIEWER, ensure_roles


def make_user(django_user_model, username: str, role: str | None):
    ensure_roles()
    user = django_user_model.objects.create_user(username=username, password=f"pw-{username}-123")
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


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


@pytest.fixture
def desk(tmp_path):
    """Conflict tickets of a small ingested trace, by run id."""
    from reviewapp.models import Ticket
    from tests.seeding import ingest_lines, review_desk_trace

    ingest_lines(tmp_path, review_desk_trace())
    return {t.run.run_id: t for t in Ticket.objects.filter(kind="conflict").select_related("run")}


@pytest.fixture(autouse=True, scope="session")
def flush_past_the_append_only_guards():
    """Between transactional tests the test database is emptied by TRUNCATE, which the
    append-only guards refuse unless told otherwise: emptying it is deliberate maintenance."""
    handle = flush.Command.handle

    def handle_ignoring_guards(self, *args, **options):
        with pgtrigger.ignore():
            return handle(self, *args, **options)

    flush.Command.handle = handle_ignoring_guards
    yield
    flush.Command.handle = handle
