"""Append-only holds against the app's own database user (issue 15, defect 4). The app ran as
the superuser that owned every table: TRUNCATE of the audit table, session_replication_role
= replica or DISABLE TRIGGER bypassed the guards, and it could drop the four-eyes
constraint. It now connects as a role that owns nothing (reviewapp/infra/roles.py).

And only what the app needs (issue 24, defect 2): that role published a policy version with
INSERT, gave itself a role in auth_user_groups and moved the audit chain's head by hand."""

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

from reviewapp.accounts.audit import Channel, audit_channel, audit_record, audit_verify
from reviewapp.accounts.roles import ADMIN, APPROVE_RULE, APPROVER, ROLE_CHANGED, account_role_set
from reviewapp.models import AuditChain, AuditEvent, PolicyVersion, RuleProposal
from reviewapp.models.guards import audit_chain
from reviewapp.policy.versions import proposal_create, proposal_decide
from tests.roles import owner_conninfo, owner_settings, separate
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


def app_conninfo() -> str:
    """A libpq connection string for the app's role, on the test database: an attacker
    holding DATABASE_URL, in a session of their own."""
    settings = connection.settings_dict
    parts = {
        "host": settings["HOST"],
        "port": settings["PORT"],
        "user": settings["USER"],
        "password": settings["PASSWORD"],
        "dbname": settings["NAME"],
    }
    return " ".join(f"{key}='{value}'" for key, value in parts.items() if value)


def test_the_app_role_cannot_publish_a_policy_version_by_hand():
    # The statement of the report, committed as an attacker's session commits it.
    with psycopg.connect(app_conninfo(), autocommit=True) as attacker:
        with pytest.raises(
            psycopg.errors.InsufficientPrivilege,
            match="publishes no proposal approved by someone other than its proposer",
        ):
            attacker.execute(
                "INSERT INTO reviewapp_policyversion (number, name, document, reason, "
                "based_on, published_at) SELECT coalesce(max(number), 0) + 1, 'mine', "
                """'{"rules": []}', 'trust me', 0, now() FROM reviewapp_policyversion"""
            )
        assert attacker.execute("SELECT count(*) FROM reviewapp_policyversion").fetchone() == (0,)
    assert not PolicyVersion.objects.exists()


def test_the_app_role_gives_a_role_only_through_the_audited_function(reviewer, approver):
    approvers = Group.objects.get(name=APPROVER)
    approve = Permission.objects.get(codename=APPROVE_RULE.split(".")[1])
    for statement, params in (
        (
            "INSERT INTO auth_user_groups (user_id, group_id) VALUES (%s, %s)",
            [reviewer.pk, approvers.pk],
        ),
        ("UPDATE auth_user_groups SET group_id = %s", [approvers.pk]),
        ("DELETE FROM auth_user_groups", None),
        ("UPDATE auth_user SET is_superuser = true WHERE id = %s", [reviewer.pk]),
        ("UPDATE auth_user SET username = 'abel2' WHERE id = %s", [approver.pk]),
        (
            "INSERT INTO auth_user (username, password, is_superuser, is_staff, is_active, "
            "first_name, last_name, email, date_joined) "
            "VALUES ('mallory', '', true, true, true, '', '', '', now())",
            None,
        ),
        (
            "INSERT INTO auth_user_user_permissions (user_id, permission_id) VALUES (%s, %s)",
            [reviewer.pk, approve.pk],
        ),
        (
            "INSERT INTO auth_group_permissions (group_id, permission_id) "
            "SELECT id, %s FROM auth_group WHERE name = 'reviewer'",
            [approve.pk],
        ),
        ("INSERT INTO auth_group (name) VALUES ('superusers')", None),
        ("UPDATE auth_permission SET codename = 'approve_rule'", None),
    ):
        refused(statement, params, match="permission denied")
    # What the app does write of a person: a sign-in, and a password hashed again.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE auth_user SET last_login = now(), password = password WHERE id = %s",
            [reviewer.pk],
        )
    assert not get_user_model().objects.get(pk=reviewer.pk).has_perm(APPROVE_RULE)

    with audit_channel(Channel.WEB):
        rita = account_role_set("rita", APPROVER, actor=approver)
        account_role_set("rita", APPROVER, actor=approver)  # no change, no event
    assert rita.has_perm(APPROVE_RULE) and not rita.is_superuser
    event = AuditEvent.objects.get(verb=ROLE_CHANGED)
    assert (event.actor, event.channel, event.target, event.data) == (
        approver,
        "web",
        "account rita",
        {"role": APPROVER, "before": ["reviewer"], "superuser": False, "created": False},
    )
    # Called by hand, as an attacker would: the same event, in the chain.
    with connection.cursor() as cursor:
        cursor.execute("SELECT reviewapp_account_set('mallory', '!', 'admin', true, NULL, 'api')")
    mallory = AuditEvent.objects.get(verb=ROLE_CHANGED, target="account mallory")
    assert mallory.data == {"role": ADMIN, "before": [], "superuser": True, "created": True}
    assert get_user_model().objects.get(username="mallory").is_superuser
    assert audit_verify().intact
    # It is the owner's, and runs as the owner: the app's role cannot change it.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT prosecdef, proowner::regrole::text FROM pg_proc "
            "WHERE proname = 'reviewapp_account_set'"
        )
        assert cursor.fetchall() == [(True, owner_settings()["USER"])]
    refused(
        "CREATE OR REPLACE FUNCTION public.reviewapp_account_set(text, text, text, boolean, "
        "integer, text) RETURNS integer AS $$ SELECT 1 $$ LANGUAGE sql",
        match="permission denied for schema public|must be owner",
    )


def test_only_the_chain_moves_the_audit_head(reviewer):
    audit_record(actor=reviewer, verb="test.event", target="one")
    for statement in (
        "UPDATE reviewapp_auditchain SET position = 0, last_hash = ''",
        "DELETE FROM reviewapp_auditchain",
        "INSERT INTO reviewapp_auditchain (id, position, last_hash) VALUES (2, 0, '')",
    ):
        refused(statement, match="permission denied")
    # The triggers' escape hatch does not skip the chaining, which runs as the owner.
    chaining = audit_chain().get_pgid(AuditEvent)
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('pgtrigger.ignore', %s, true)", ["{" + chaining + "}"])
        cursor.execute(
            "INSERT INTO reviewapp_auditevent (verb, target, data, created_at, channel, "
            "position, prev_hash, hash) VALUES ('forged', '', '{}', now(), 'web', 99, '', 'x')"
        )
    assert AuditEvent.objects.get(verb="forged").position == 2
    head = AuditChain.objects.get()
    assert (head.position, head.last_hash) == (2, AuditEvent.objects.get(verb="forged").hash)
    assert audit_verify().intact


def test_seed_demo_gives_its_roles_audited_and_publishes_with_four_eyes(monkeypatch, capsys):
    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    call_command("seed_demo", runs=20)
    call_command("seed_demo", runs=20)
    # What this transaction's commit would check (a version's four eyes), checked now.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    given = dict(AuditEvent.objects.filter(verb=ROLE_CHANGED).values_list("target", "data__role"))
    assert given == {
        "account reviewer": "reviewer",
        "account reviewer2": "reviewer",
        "account approver": "approver",
        "account viewer": "viewer",
        "account admin": "admin",
    }
    assert get_user_model().objects.get(username="admin").is_superuser
    assert PolicyVersion.objects.get().published_by.username == "approver"
    assert get_user_model().objects.get(username="reviewer").check_password("a-demo-password")
