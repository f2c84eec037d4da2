"""People: who has an account, in which role, whether it is active, when they last signed
in; and what an admin does to them (the people page and `manage.py people` both call
these): invite someone, set a role, deactivate or reactivate an account.

Each change goes through the database's audited functions (accounts/roles.py:
account_role_set, account_active_set), which refuse to leave no active admin. There is no
email delivery: an invitation is an account with no usable password and a one-time link
to set one (Django's password reset token), shown to the admin to hand over. The link
works until a password is set with it (the token covers the password hash and the last
sign-in) or PASSWORD_RESET_TIMEOUT passes, and only for an active account."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.db import transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from reviewapp.accounts.audit import audit_record
from reviewapp.accounts.roles import (
    ADMIN,
    ROLE_PERMISSIONS,
    account_active_set,
    account_role_set,
)

ROLES = tuple(ROLE_PERMISSIONS)
# The verbs of the events recorded here (the role and active changes record their own).
LINK_ISSUED = "account.password_link"
PASSWORD_SET = "account.password_set"


class PeopleError(ValueError):
    """A change that cannot be made as asked (the message says why)."""


@dataclass(frozen=True)
class Person:
    """One row of the people page."""

    pk: int
    username: str
    role: str | None
    superuser: bool
    active: bool
    last_login: datetime | None
    date_joined: datetime
    can_sign_in: bool  # has a usable password (an invitation not yet taken up has none)


def people() -> list[Person]:
    """Everyone with an account, active ones first, by username."""
    users = get_user_model().objects.prefetch_related("groups").order_by("-is_active", "username")
    return [
        Person(
            pk=user.pk,
            username=user.get_username(),
            role=_role_of(user),
            superuser=user.is_superuser,
            active=user.is_active,
            last_login=user.last_login,
            date_joined=user.date_joined,
            can_sign_in=user.has_usable_password(),
        )
        for user in users
    ]


def _role_of(user: Any) -> str | None:
    names = [group.name for group in user.groups.all() if group.name in ROLE_PERMISSIONS]
    return names[0] if names else None


def person_invite(
    username: str, role: str, *, actor: Any, with_link: bool = True
) -> tuple[Any, str]:
    """A new account with this role and no usable password, and the path of its one-time
    link to set one (for the admin to hand over; "" if not with_link: the caller sets the
    password itself). PeopleError when the name is taken."""
    username = username.strip()
    if not username:
        raise PeopleError("give the person a username")
    _check_role(role)
    users = get_user_model()
    if users.objects.filter(username=users.normalize_username(username)).exists():
        raise PeopleError(f"there is already an account named {username}")
    with transaction.atomic():
        user = account_role_set(username, role, actor=actor)
        link = password_link(user, actor=actor) if with_link else ""
    return user, link


def password_link(user: Any, *, actor: Any) -> str:
    """The path of a one-time link for `user` to set a password (the one before, if any,
    keeps working until a password is set), recorded as issued by `actor`."""
    if not user.is_active:
        raise PeopleError(f"{user.get_username()} is deactivated: reactivate them first")
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    path = reverse("set-password", args=[uid, default_token_generator.make_token(user)])
    audit_record(actor=actor, verb=LINK_ISSUED, target=f"account {user.get_username()}")
    return path


def person_role_set(user: Any, role: str, *, actor: Any) -> Any:
    """Give `user` this role instead of theirs. Django's superuser flag stays only with the
    admin role (a demoted superuser is no admin any more). LastAdminError (from the
    database) when no active admin would remain."""
    _check_role(role)
    return account_role_set(
        user.get_username(), role, actor=actor, superuser=user.is_superuser and role == ADMIN
    )


def person_active_set(user: Any, active: bool, *, actor: Any) -> Any:
    """Deactivate (their sessions and API tokens stop working at once, their tokens are
    revoked) or reactivate `user`. LastAdminError when no active admin would remain."""
    return account_active_set(user.get_username(), active, actor=actor)


def password_set_record(user: Any) -> None:
    """A person set their password with a one-time link (views: the set-password page)."""
    audit_record(actor=user, verb=PASSWORD_SET, target=f"account {user.get_username()}")


def _check_role(role: str) -> None:
    if role not in ROLE_PERMISSIONS:
        raise PeopleError(f"no role named {role!r}: one of {', '.join(ROLES)}")
