"""The database roles tests act as: the app's (DATABASE_URL, the connection Django uses) and
the owner of the tables (MIGRATE_DATABASE_URL, which migrations run as), on the test
database. scripts/test makes both; with only DATABASE_URL set, they are one role."""

from __future__ import annotations

import os

import dj_database_url

CREDENTIALS = ("USER", "PASSWORD", "HOST", "PORT")


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
