"""Least privilege on PostgreSQL: the app connects as a role that owns nothing.

Two roles share the database. The owner (MIGRATE_DATABASE_URL) owns every table, trigger and
function: `manage.py migrate` connects as it (as_owner), and after every migrate grants the
app's role (DATABASE_URL's user) what the app needs and no more (app_role_grant):

- SELECT and INSERT on what is append-only (lines, records, judgements, verdicts, findings,
  versions, candidates, settlements, comments, the audit trail): no DELETE or TRUNCATE,
  whatever the triggers say, and UPDATE only of the columns the append-only trigger may
  let change: those that can hold a value, for an approved erasure (erasable_columns; none
  on the audit trail), and a line's raw bytes and tombstone columns and a record's data,
  for retention's tombstone (TOMBSTONED);
- SELECT, INSERT and UPDATE where rows legitimately change (batches, runs, tickets,
  proposals, tokens...); DELETE only where rows are meant to go (the queue's count deltas
  folded every minute, a proposal's motivating tickets, the tallies' reporting copy, and
  Django's sessions);
- SELECT only (NARROWER) on who has which role or permission (accounts, memberships,
  groups, permissions): the app records a sign-in and a re-hashed password, and gives an
  account or a role only through reviewapp_account_set (migration 0033), a function of the
  owner's that records its audit event in the same statement, so no role is given
  silently; and on the audit chain's head, which only the trigger that chains each event
  moves (models.guards.audit_chain, run as the owner);
- no TRUNCATE, REFERENCES or TRIGGER anywhere, no CREATE in the schema, no temporary tables
  (one would hide a table from the guards' queries), USAGE on sequences, EXECUTE on the
  functions in APP_FUNCTIONS (no one else's: PostgreSQL lets PUBLIC run a new function).

Only an owner can disable a trigger, drop a constraint or alter a table, and only a
superuser can set session_replication_role: the app's role can do none of them. The
triggers' escape hatch for deliberate maintenance (pgtrigger.ignore, a setting any session
may set) is honoured only for a session of a role that owns the table
(_pgtrigger_should_ignore, replaced after every migrate), who could disable the trigger
anyway: the session's role, not the role a function runs as, so that a trigger running
as the owner (audit_chain) cannot be skipped by the app's role.

Without MIGRATE_DATABASE_URL (a single-role setup) nothing here does anything."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, ProgrammingError, connections, transaction

log = logging.getLogger(__name__)
_CREDENTIALS = ("USER", "PASSWORD", "HOST", "PORT")

# Tables of the app whose rows are meant to be deleted (others' are Django's own).
DELETABLE = {
    "reviewapp_ticketfacetdelta",
    "reviewapp_ticketcombinationdelta",
    "reviewapp_ruleproposal_tickets",
    # The tallies' reporting copy: a run judged again has its rows replaced.
    "reviewapp_tallyentry",
    "reviewapp_tallyrun",
    "reviewapp_tallystate",
    # A protected raw value goes when the person it belongs to is erased.
    "reviewapp_protectedvalue",
    # Suggested rules are derived from the marks and replaced each time they are computed.
    "reviewapp_rulesuggestion",
}

# Tables the app's role gets less on than their kind would: Django's own (accounts and
# what gives them permissions) and the audit chain's head.
NARROWER = {
    # A sign-in's time, and a password Django hashes again on sign-in when its hasher changes.
    "auth_user": "SELECT, UPDATE (last_login, password)",
    "auth_user_groups": "SELECT",
    "auth_user_user_permissions": "SELECT",
    # Made by migrate (accounts/roles.py: ensure_roles, and Django's own).
    "auth_group": "SELECT",
    "auth_group_permissions": "SELECT",
    "auth_permission": "SELECT",
    "django_content_type": "SELECT",
    "reviewapp_auditchain": "SELECT",
}

# Append-only tables of which retention (privacy/retention.py) may turn rows into
# tombstones: UPDATE of these columns alone, and the append-only trigger lets through only
# that change (models/guards.py: TRACE_LINE_TOMBSTONE, TRACE_RECORD_TOMBSTONE).
TOMBSTONED = {
    "reviewapp_traceline": ("raw", "expired_at", "raw_sha256", "raw_size"),
    "reviewapp_tracerecord": ("data",),
}

# The owner's functions the app's role may call.
APP_FUNCTIONS = (
    "public.reviewapp_account_set(text, text, text, boolean, integer, text)",
    "public.reviewapp_raw_access_set(text, boolean, integer, text, text)",
    "public.reviewapp_account_active_set(text, boolean, integer, text)",
)

HARDENED_IGNORE = """
CREATE OR REPLACE FUNCTION public._pgtrigger_should_ignore(trigger_name NAME)
RETURNS BOOLEAN AS $$
    DECLARE
        _pgtrigger_ignore TEXT[];
    BEGIN
        BEGIN
            SELECT INTO _pgtrigger_ignore CURRENT_SETTING('pgtrigger.ignore');
            EXCEPTION WHEN OTHERS THEN
        END;
        IF _pgtrigger_ignore IS NULL OR NOT (trigger_name = ANY(_pgtrigger_ignore)) THEN
            RETURN FALSE;
        END IF;
        -- Honoured only for a session of a role that owns the trigger's table (it could
        -- disable it): not current_user, the owner inside a function run as the owner.
        RETURN EXISTS (
            SELECT 1 FROM pg_catalog.pg_trigger t
            JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
            WHERE t.tgname = trigger_name
            AND pg_catalog.pg_has_role(session_user, c.relowner, 'USAGE')
        );
    END;
$$ LANGUAGE plpgsql
"""


def owner_credentials() -> dict[str, Any] | None:
    owner = getattr(settings, "MIGRATE_DATABASE", None)
    return {key: owner.get(key) for key in _CREDENTIALS} if owner else None


@contextmanager
def as_owner(alias: str = DEFAULT_DB_ALIAS) -> Iterator[bool]:
    """The connection `alias` as the owner of the tables for a while (the same database,
    the owner's credentials); True when it switched. Outside any transaction."""
    owner = owner_credentials()
    connection = connections[alias]
    if owner is None:
        yield False
        return
    if connection.settings_dict.get("USER") == owner["USER"]:
        yield False
        return
    saved = {key: connection.settings_dict.get(key) for key in _CREDENTIALS}
    connection.close()
    connection.settings_dict.update(owner)
    try:
        yield True
    finally:
        connection.close()
        connection.settings_dict.update(saved)


def table_privileges(models: Iterable[Any]) -> dict[str, str]:
    """What the app's role may do with each table of these models (and their many-to-many
    tables), from what each model declares (models/guards.py)."""
    privileges: dict[str, str] = {}
    for model in models:
        meta = model._meta
        if not meta.managed or meta.proxy:
            continue
        triggers = {trigger.name for trigger in getattr(meta, "triggers", [])}
        table = meta.db_table
        if table in NARROWER:
            privileges[table] = NARROWER[table]
        elif "append_only" in triggers:
            columns = sorted({*erasable_columns(model), *TOMBSTONED.get(table, ())})
            updated = f", UPDATE ({', '.join(columns)})" if columns else ""
            privileges[table] = "SELECT, INSERT" + updated
        elif meta.app_label == "reviewapp" and table not in DELETABLE:
            privileges[table] = "SELECT, INSERT, UPDATE"
        else:
            privileges[table] = "SELECT, INSERT, UPDATE, DELETE"
    privileges["django_migrations"] = "SELECT"
    return privileges


# The kinds of column an erasure rewrites (privacy/erasure.py finds them in the catalog).
VALUE_FIELDS = {"CharField", "TextField", "SlugField", "JSONField", "BinaryField"}
# What marks an append_only() trigger that an approved erasure passes (guards.ERASURE_SETTING).
_ERASURE_DOOR = "crosscheck.erasure"


def erasable_columns(model: Any) -> list[str]:
    """The columns of an append-only table whose guard lets an approved erasure through
    that can hold a value, for the erasure to replace it by its token (the guard refuses
    any UPDATE outside one; DELETE stays ungranted)."""
    guard = next(t for t in model._meta.triggers if t.name == "append_only")
    if _ERASURE_DOOR not in guard.func:
        return []
    return [
        field.column
        for field in model._meta.concrete_fields
        if field.get_internal_type() in VALUE_FIELDS
    ]


def app_role_grant(using: str, models: Iterable[Any]) -> bool:
    """Give the app's role exactly its privileges on the database `using` is connected to
    (as the owner, after migrate); False when there is no separate app role."""
    role = getattr(settings, "APP_DATABASE_ROLE", "")
    connection = connections[using]
    if not role:
        return False
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user, current_database()")
        user, database = cursor.fetchone()
        if user == role:
            return False
        app = quote(role)
        statements = [
            "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
            f"REVOKE TEMPORARY ON DATABASE {quote(database)} FROM PUBLIC",
            f"REVOKE ALL ON DATABASE {quote(database)} FROM {app}",
            f"GRANT CONNECT ON DATABASE {quote(database)} TO {app}",
            f"GRANT USAGE ON SCHEMA public TO {app}",
            f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {app}",
            f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {app}",
            f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {app}",
        ]
        statements += [
            f"GRANT {granted} ON {quote(table)} TO {app}"
            for table, granted in sorted(table_privileges(models).items())
        ]
        for function in APP_FUNCTIONS:
            statements += [
                f"REVOKE ALL ON FUNCTION {function} FROM PUBLIC",
                f"GRANT EXECUTE ON FUNCTION {function} TO {app}",
            ]
        statements.append(HARDENED_IGNORE)
        for statement in statements:
            try:
                with transaction.atomic(using=using):
                    cursor.execute(statement)
            except ProgrammingError as exc:
                # Not this role's to grant (a database made by another role, say): say so.
                log.warning("least privilege: %s: %s", statement.strip().splitlines()[0], exc)
    return True
