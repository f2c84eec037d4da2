"""Shared fixtures: users in each role."""

import pytest
from django.contrib.auth.models import Group

from reviewapp.roles import ADMIN, APPROVER, REVIEWER, VIEWER, ensure_roles


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
