"""Append-only holds against the app's own database user (issue 15, defect 4). The app ran as
the superuser that owned every table: TRUNCATE of the audit table, session_replication_role
= replica or DISABLE TRIGGER bypassed the guards, and it could drop the four-eyes
constraint. It now connects as a role that owns nothing (reviewapp/infra/roles.py)."""

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction

from reviewapp.accounts.audit import audit_record
from reviewapp.models import AuditEvent, RuleProposal
from reviewapp.policy.versions import proposal_create, proposal_decide
from tests.roles import owner_conninfo, separate
from tests.test_database_guards import APPEND_ONLY, every_table_has_a_row  # noqa: F401

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not separate(), reason="needs the two roles scripts/test makes"),
]


def refused(statement: str, params=None, *, match: str) -> None:
    with (
        pytest.raises(DatabaseError, match=match),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(statement, params)


def scalar(statement: str):
    with connection.cursor() as cursor:
        cursor.execute(statement)
        return cursor.fetchone()[0]


@pytest.fixture
def decided(reviewer, approver) -> RuleProposal:
    proposal = proposal_create(
        user=reviewer,
        kind="authoritative-source",
        change={"field": "status", "source": "refund-service"},
        rationale="refunds are the refund service's",
    )
    audit_record(actor=reviewer, verb="test.event", target="x")
    return proposal_decide(proposal=proposal, user=approver, approve=True, reason="agreed")


def test_the_app_role_owns_nothing_and_is_no_superuser():
    assert scalar("SELECT current_user") == "crosscheck_app"
    assert not scalar(
        "SELECT rolsuper OR rolcreatedb OR rolcreaterole FROM pg_roles WHERE rolname = current_user"
    )
    assert scalar("SELECT count(*) FROM pg_class WHERE relowner = current_user::regrole") == 0
    assert scalar("SELECT count(*) FROM pg_proc WHERE proowner = current_user::regrole") == 0
    assert scalar(
        "SELECT datdba <> current_user::regrole FROM pg_database WHERE datname = current_database()"
    )


@pytest.mark.parametrize(
    "model", sorted(APPEND_ONLY, key=lambda m: m.__name__), ids=lambda m: m.__name__
)
def test_the_app_role_may_not_update_delete_or_truncate_what_is_append_only(model):
    table = model._meta.db_table
    for statement in (f"UPDATE {table} SET id = id", f"DELETE FROM {table}", f"TRUNCATE {table}"):
        refused(statement, match="permission denied")


def test_the_guards_cannot_be_bypassed_by_the_app_role(decided):
    audit = AuditEvent._meta.db_table
    refused("TRUNCATE reviewapp_auditevent CASCADE", match="permission denied")
    refused("SET session_replication_role = replica", match="permission denied")
    refused(f"ALTER TABLE {audit} DISABLE TRIGGER USER", match="must be owner")
    refused(f"ALTER TABLE {audit} DISABLE TRIGGER ALL", match="must be owner")
    refused(
        "ALTER TABLE reviewapp_ruleproposal DROP CONSTRAINT proposal_four_eyes",
        match="must be owner",
    )
    refused(
        "DROP TRIGGER pgtrigger_decided_proposal_061bb ON reviewapp_ruleproposal",
        match="must be owner",
    )
    refused("CREATE TABLE reviewapp_shadow (id int)", match="permission denied for schema public")
    refused(
        "CREATE TEMP TABLE reviewapp_judgement (id int)",
        match="permission denied to create temporary",
    )
    refused(
        "CREATE OR REPLACE FUNCTION public._pgtrigger_should_ignore(trigger_name NAME) "
        "RETURNS BOOLEAN AS $$ SELECT true $$ LANGUAGE sql",
        match="permission denied for schema public|must be owner",
    )
    refused("ALTER ROLE crosscheck_app SUPERUSER", match="permission denied|must be superuser")


def test_the_triggers_escape_hatch_is_not_the_app_roles(decided):
    # pgtrigger.ignore is a setting any session may set: it is honoured for the owner only.
    refused(
        "SELECT set_config('pgtrigger.ignore', "
        "'{pgtrigger_decided_proposal_061bb,pgtrigger_proposal_kept_7d1bb}', true); "
        "UPDATE reviewapp_ruleproposal SET state = 'rejected' WHERE id = %s",
        [decided.pk],
        match="a decided proposal cannot be changed",
    )
    decided.refresh_from_db()
    assert decided.state == "approved"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("every_table_has_a_row")
def test_the_owner_too_is_refused_by_the_triggers():
    """UPDATE, DELETE and TRUNCATE of every append-only table, as the owner of the tables
    (who could disable the triggers, but does not get past them by accident)."""
    with psycopg.connect(owner_conninfo(connection)) as owner:
        for model in APPEND_ONLY:
            table = model._meta.db_table
            for statement in (
                f"UPDATE {table} SET id = id",
                f"DELETE FROM {table}",
                f"TRUNCATE {table} CASCADE",
            ):
                with (
                    pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"),
                    owner.transaction(),
                ):
                    owner.execute("SET CONSTRAINTS ALL IMMEDIATE")
                    owner.execute(statement)
            assert model.objects.exists(), table
