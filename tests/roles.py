"""The database roles tests act as: the app's (DATABASE_URL, the connection Django uses) and
the owner of the tables (MIGRATE_DATABASE_URL, which migrations run as), on the test
database. scripts/test makes both; with only DATABASE_URL set, they are one role."""

from __future__ import annotations

import os

import dj_database_url
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import Group
from django.db import connection

CREDENTIALS = ("USER", "PASSWORD", "HOST", "PORT")

# The people tests act as, given their role before the test begins, as an administrator would
# have: by the owner of the tables, with no audit event (tests assert whole audit trails).
# The app's role may not do this itself (reviewapp/accounts/roles.py: account_role_set is its
# audited way); this function exists in the test database only, made by the owner.
PEOPLE_SET_UP_BEFORE = """
CREATE OR REPLACE FUNCTION public.tests_person_set_up_before(
    account_name text, password_hash text, role_name text
) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    person integer;
BEGIN
    INSERT INTO auth_user (username, password, is_superuser, is_staff, is_active,
                           first_name, last_name, email, date_joined)
    VALUES (account_name, password_hash, false, false, true, '', '', '', now())
    RETURNING id INTO person;
    INSERT INTO auth_user_groups (user_id, group_id)
    SELECT person, id FROM auth_group WHERE name = role_name;
    RETURN person;
END;
$$
"""


def separate() -> bool:
    """Whether the app and the owner are two roles (as scripts/test and production have it)."""
    return bool(os.environ.get("MIGRATE_DATABASE_URL"))


def owner_settings() -> dict:
    url = os.environ.get("MIGRATE_DATABASE_URL") or os.environ["DATABASE_URL"]
    return dj_database_url.parse(url)


def become(connection, credentials: dict) -> None:
    """Reconnect `connection` (same database) with these credentials, at its next query."""
    connection.close()
    connection.settings_dict.update({key: credentials.get(key) for key in CREDENTIALS})


def owner_conninfo(connection) -> str:
    """A libpq connection string for the owner, on the database `connection` uses."""
    owner = owner_settings()
    parts = {
        "host": owner["HOST"],
        "port": owner["PORT"],
        "user": owner["USER"],
        "password": owner["PASSWORD"],
        "dbname": connection.settings_dict["NAME"],
    }
    return " ".join(f"{key}='{value}'" for key, value in parts.items() if value)


def people_set_up_before_install(owner_connection, app_role: str) -> None:
    """As the owner, on the test database: the function person_set_up_before calls."""
    signature = "public.tests_person_set_up_before(text, text, text)"
    with owner_connection.cursor() as cursor:
        cursor.execute(PEOPLE_SET_UP_BEFORE)
        cursor.execute(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
        cursor.execute(f'GRANT EXECUTE ON FUNCTION {signature} TO "{app_role}"')


def person_set_up_before(users, username: str, password: str, role: str | None):
    """An account with this role (None: none) that exists before the test, unaudited."""
    if not separate():
        user = users.objects.create_user(username=username, password=password)
        if role:
            user.groups.add(Group.objects.get(name=role))
        return user
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tests_person_set_up_before(%s, %s, %s)",
            [users.normalize_username(username), make_password(password), role],
        )
        (pk,) = cursor.fetchone()
    return users.objects.get(pk=pk)
