"""Roles are Django groups made of the app's permissions; every view checks a permission
on the server, never only by hiding a button.

A person gets an account or a role one way only, account_role_set, which records an audit
event whenever it changes anything. The database does it: the app's role may
not write memberships, permissions or the superuser flag (reviewapp/infra/roles.py), and
calls reviewapp_account_set (migration 0033), a function that runs as the owner of the
tables and records the event in the same statement, so that no role is given silently.
An account is deactivated or reactivated the same way (account_active_set), and neither
may leave no active admin: the database refuses (migration 0046)."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import Group, Permission
from django.db import DataError, IntegrityError, connection, transaction

from reviewapp.accounts.audit import current_channel

VIEWER, REVIEWER, APPROVER, ADMIN = "viewer", "reviewer", "approver", "admin"
INGEST = "reviewapp.ingest_traces"
WORK_TICKET = "reviewapp.work_ticket"
PROPOSE_RULE = "reviewapp.propose_rule"
APPROVE_RULE = "reviewapp.approve_rule"
CLOSE_MONTH = "reviewapp.close_month"
RUN_REPLAY = "reviewapp.run_replay"
# Admins only: request, and approve another admin's request of, a value's erasure.
ERASE_VALUES = "reviewapp.erase_values"
MANAGE_REDACTION = "reviewapp.manage_redaction"
# Admins only: add people, set their roles, deactivate them (accounts/people.py).
MANAGE_PEOPLE = "reviewapp.manage_people"
# Admins only: where alerts are sent (webhooks and their secrets, email addresses).
MANAGE_ALERTS = "reviewapp.manage_alerts"
# Reading raw trace lines and envelopes: a grant beside the role, any role may get it, and
# no role gives it (reviewapp/privacy/access.py; account_raw_access_set).
SEE_RAW_DATA = "reviewapp.see_raw_data"

ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    VIEWER: (),
    REVIEWER: (INGEST, WORK_TICKET, PROPOSE_RULE, RUN_REPLAY),
    APPROVER: (INGEST, WORK_TICKET, PROPOSE_RULE, APPROVE_RULE, CLOSE_MONTH, RUN_REPLAY),
    ADMIN: (
        INGEST,
        WORK_TICKET,
        PROPOSE_RULE,
        APPROVE_RULE,
        CLOSE_MONTH,
        RUN_REPLAY,
        ERASE_VALUES,
        MANAGE_REDACTION,
        MANAGE_PEOPLE,
        MANAGE_ALERTS,
    ),
}

# The verb of the event a role given records (reviewapp_account_set writes it too).
ROLE_CHANGED = "account.role"
# ... and of the raw data permission given or taken (reviewapp_raw_access_set).
RAW_ACCESS_CHANGED = "account.raw_data"
# ... and of an account deactivated or reactivated (reviewapp_account_active_set).
ACTIVE_CHANGED = "account.active"
# The name of the database's refusal of a change that would leave no active admin
# (migration 0046: reviewapp_account_set and reviewapp_account_active_set).
AN_ADMIN_REMAINS = "an_active_admin_remains"


class LastAdminError(Exception):
    """The change would leave no active admin (refused by the database)."""


def ensure_roles(**_kwargs) -> None:
    """Create or repair the role groups (run after every migrate, as the owner)."""
    for role, permissions in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        codenames = [name.split(".", 1)[1] for name in permissions]
        group.permissions.set(
            Permission.objects.filter(content_type__app_label="reviewapp", codename__in=codenames)
        )


def account_role_set(
    username: str,
    role: str | None,
    *,
    actor: Any = None,
    superuser: bool = False,
    password: str | None = None,
) -> Any:
    """Give `username` exactly this role (None: none) and Django's superuser and staff
    flags or not, making the account first if there is none (with `password`; None: no
    usable one). One audit event, `account.role`, credited to `actor` and the current
    channel, whenever this changes anything; nothing when it changes nothing."""
    if role is not None and role not in ROLE_PERMISSIONS:
        raise ValueError(f"no role named {role!r}")
    users = get_user_model()
    name = users.normalize_username(username)
    # A savepoint: a refusal (the last admin) leaves the caller's transaction usable.
    with _last_admin_refused(), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT reviewapp_account_set(%s, %s, %s, %s, %s, %s)",
            [name, make_password(password), role, superuser, _pk(actor), current_channel()],
        )
        (pk,) = cursor.fetchone()
    return users.objects.get(pk=pk)


def account_active_set(username: str, active: bool, *, actor: Any = None) -> Any:
    """Deactivate `username` (no sign-in, session or API token of theirs works any more;
    their live tokens are revoked) or reactivate them, through reviewapp_account_active_set
    (migration 0046), which records an `account.active` event credited to `actor` and the
    current channel whenever this changes anything. LastAdminError when no active admin
    would remain; ValueError when there is no such account."""
    users = get_user_model()
    try:
        with _last_admin_refused(), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT reviewapp_account_active_set(%s, %s, %s, %s)",
                [users.normalize_username(username), active, _pk(actor), current_channel()],
            )
            (pk,) = cursor.fetchone()
    except DataError as exc:  # invalid_parameter_value: no such account
        raise ValueError(f"no account named {username!r}") from exc
    return users.objects.get(pk=pk)


@contextmanager
def _last_admin_refused() -> Iterator[None]:
    """The database's refusal to leave no active admin, as LastAdminError."""
    try:
        yield
    except IntegrityError as exc:
        diag = getattr(exc.__cause__, "diag", None)
        if getattr(diag, "constraint_name", None) == AN_ADMIN_REMAINS:
            raise LastAdminError(getattr(diag, "message_primary", None) or str(exc)) from exc
        raise


def _pk(actor: Any) -> int | None:
    return None if actor is None else actor.pk


def account_raw_access_set(username: str, allowed: bool, *, actor: Any, reason: str) -> Any:
    """Give `username` the raw data permission (SEE_RAW_DATA) or take it away, through
    reviewapp_raw_access_set (migration 0038), which records an `account.raw_data` event
    with `reason`, credited to `actor` and the current channel, whenever this changes
    anything. Only an admin may; PermissionError otherwise."""
    if not is_admin(actor):
        raise PermissionError("only an admin may give or take the raw data permission")
    if not reason.strip():
        raise ValueError("say why the raw data permission is given or taken")
    users = get_user_model()
    # A savepoint: a refusal (no such account) leaves the caller's transaction usable.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT reviewapp_raw_access_set(%s, %s, %s, %s, %s)",
            [users.normalize_username(username), allowed, _pk(actor), current_channel(), reason],
        )
        (pk,) = cursor.fetchone()
    return users.objects.get(pk=pk)


def is_admin(user: Any) -> bool:
    """An admin: the admin role, or Django's superuser flag."""
    if user is None or not user.is_active:
        return False
    return bool(user.is_superuser or user.groups.filter(name=ADMIN).exists())
