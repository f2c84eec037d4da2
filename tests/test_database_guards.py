"""What the database refuses, on PostgreSQL (the test database) and on SQLite (a migrated
file): every append-only model refuses UPDATE, DELETE and TRUNCATE; a decided proposal
keeps its decision; a policy version publishes a proposal someone other than its proposer
approved; only an active judgement is a run's current one or opens a ticket."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.db import DatabaseError, IntegrityError, connection, transaction

from reviewapp.ingest.pipeline import ingest_file
from reviewapp.judging.core import judge, stored_runs
from reviewapp.judging.store import REPLAY, SHADOW, judgements_store
from reviewapp.models import (
    AuditEvent,
    Finding,
    FixtureRun,
    FixtureSet,
    FixtureSuiteMark,
    GateAnswer,
    GateMode,
    IngestBatch,
    Judgement,
    MonthClosing,
    PolicyCandidate,
    PolicyVersion,
    ProspectiveSettlement,
    ReplayResult,
    RuleProposal,
    Run,
    ShadowBatch,
    Ticket,
    TicketComment,
    TraceLine,
    TraceRecord,
    Verdict,
)
from reviewapp.policy.candidates import (
    candidate_of_proposal,
    candidate_of_version,
    candidate_ref,
    policy_of_candidate,
)
from reviewapp.policy.settlements import settlements_label
from reviewapp.policy.versions import (
    policy_version_publish,
    proposal_create,
    proposal_decide,
)
from reviewapp.replay.fixtures import freeze_ticket, suite_mark
from reviewapp.replay.jobs import job_start, job_work
from reviewapp.review.changes import ticket_comment

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parent.parent
SPEC = Path(__file__).resolve().parent / "fixtures" / "spec"

# Every model whose rows, once written, are never changed: the one list, checked against
# what the models declare.
APPEND_ONLY = {
    AuditEvent,
    PolicyCandidate,
    Finding,
    GateAnswer,
    GateMode,
    FixtureRun,
    FixtureSet,
    FixtureSuiteMark,
    Judgement,
    MonthClosing,
    PolicyCandidate,
    PolicyVersion,
    ProspectiveSettlement,
    ShadowBatch,
    ReplayResult,
    TicketComment,
    TraceLine,
    TraceRecord,
    Verdict,
}


def declared(name: str) -> set:
    return {
        model
        for model in apps.get_app_config("reviewapp").get_models()
        if name in {trigger.name for trigger in getattr(model._meta, "triggers", [])}
    }


def test_the_append_only_models_are_the_ones_declared():
    assert declared("append_only") == APPEND_ONLY


@pytest.fixture
def every_table_has_a_row(tmp_path, reviewer, approver):
    path = tmp_path / "t.jsonl"
    twin = {"runId": "r-twin", "type": "tool_observation", "observationId": "o1", "source": "a"}
    path.write_bytes(
        (SPEC / "order-status.jsonl").read_bytes()
        + (
            json.dumps({**twin, "status": "x"}) + "\n" + json.dumps({**twin, "status": "y"}) + "\n"
        ).encode()
    )
    ingest_file(path, channel=IngestBatch.Channel.CLI)
    ticket = Ticket.objects.filter(kind="conflict", field="status").first()
    ticket_comment(ticket, actor=reviewer, text="looked")
    proposal = proposal_create(
        user=reviewer,
        kind="authoritative-source",
        change={"field": "status", "source": "refund-service"},
        rationale="the refund service owns refunds",
    )
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="")
    version = policy_version_publish(user=approver, reason="owners")
    settlements_label(version)
    candidate_of_version(version)
    GateMode.objects.create(action="issue_refund", mode="enforce", reason="r", chosen_by=approver)
    GateAnswer.objects.create(action="issue_refund", decision="block", mode="enforce")
    ShadowBatch.objects.create(batch=IngestBatch.objects.first())
    MonthClosing.objects.create(
        month=date(2026, 8, 1), action="closed", figures={}, time_zone="UTC", actor=approver
    )
    fixture_set = freeze_ticket(ticket, user=reviewer)
    suite_mark(fixture_set, in_suite=True, user=reviewer)
    job = job_start(fixture_set, candidate_of_version(version), user=reviewer, send=False)
    job_work(job.pk, budget=30)
    for model in APPEND_ONLY:
        assert model.objects.exists(), model.__name__


@pytest.mark.parametrize(
    "model", sorted(APPEND_ONLY, key=lambda m: m.__name__), ids=lambda m: m.__name__
)
def test_postgresql_refuses_update_delete_and_truncate_of_what_is_append_only(
    model, every_table_has_a_row
):
    table, pk = model._meta.db_table, model.objects.values_list("pk", flat=True).first()
    before = model.objects.count()
    for statement in (
        f"UPDATE {table} SET id = id WHERE id = %s",
        f"DELETE FROM {table} WHERE id = %s",
        f"TRUNCATE {table} CASCADE",
    ):
        # The app's role has not even the privilege (tests/security/test_least_privilege.py
        # shows the owner refused by the triggers).
        with (
            pytest.raises(DatabaseError, match="append-only|permission denied"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            # The rows this test wrote have deferred checks pending, which would refuse the
            # TRUNCATE for that reason alone: run them first.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute(statement, [pk] if "%s" in statement else None)
    assert model.objects.count() == before


def test_a_shadow_or_replay_judgement_moves_no_run_and_opens_no_ticket(every_table_has_a_row):
    run = Run.objects.get(run_id="stale-search")
    current, tickets = run.current_judgement_id, list(Ticket.objects.values_list("pk", "revision"))
    candidate = candidate_of_proposal(
        proposal_create(
            user=User.objects.get(username="rita"),
            kind="authoritative-source",
            change={"field": "status", "source": "search-index"},
            rationale="what if the index owned it",
        )
    )
    assert candidate.number == PolicyVersion.objects.get().number + 1
    for purpose in (SHADOW, REPLAY):
        stored = judgements_store(
            judge(stored_runs([run.pk]), policy_of_candidate(candidate)),
            purpose=purpose,
            policy=candidate_ref(candidate),
        )
        assert [s.current for s in stored] == [False]
    run.refresh_from_db()
    assert run.current_judgement_id == current
    assert list(Ticket.objects.values_list("pk", "revision")) == tickets
    shadow = Judgement.objects.get(run=run, purpose=SHADOW)

    # Nor can anyone make it so by hand.
    with pytest.raises(DatabaseError, match="only an active judgement"), transaction.atomic():
        Run.objects.filter(pk=run.pk).update(current_judgement=shadow)
    verdict = Verdict.objects.filter(judgement=shadow).first()
    with pytest.raises(DatabaseError, match="only an active judgement"), transaction.atomic():
        Ticket.objects.filter(run=run).update(judgement=shadow, verdict=verdict)
    other = Judgement.objects.exclude(run=run).filter(purpose="active").first()
    # A shadow judgement that names no candidate is refused too.
    with pytest.raises(IntegrityError), transaction.atomic():
        Judgement.objects.create(run=run, purpose=SHADOW, policy_number=9, through_record_id=1)
    with pytest.raises(DatabaseError, match="only an active judgement"), transaction.atomic():
        Run.objects.filter(pk=run.pk).update(current_judgement=other)


# Four eyes on every policy version (issue 24, defect 2): a version inserted by hand, as the
# app's role, with no proposal behind it that someone other than its proposer approved.
FORGED_VERSION = (
    "INSERT INTO reviewapp_policyversion (number, name, document, reason, based_on, "
    "published_by_id, published_at) SELECT coalesce(max(number), 0) + 1, 'forged', "
    """'{"rules": []}', 'no one approved this', coalesce(max(number), 0), %s, now() """
    "FROM reviewapp_policyversion RETURNING id"
)
UNAPPROVED = "publishes no proposal approved by someone other than its proposer"


def version_forged(publisher, *then: tuple[str, list], refusal: str = UNAPPROVED) -> None:
    """Insert a version by hand published by `publisher`, run `then` (SQL and parameters,
    `{version}` its id), and commit: refused with `refusal`, and nothing of it is left."""
    versions = PolicyVersion.objects.count()
    with (
        pytest.raises(DatabaseError, match=refusal),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(FORGED_VERSION, [publisher.pk])
        (version,) = cursor.fetchone()
        for statement, params in then:
            cursor.execute(statement.format(version=version), params)
        # The check runs when the transaction commits: make it now.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    assert PolicyVersion.objects.count() == versions


def published_in(proposal) -> tuple[str, list]:
    """The statement marking `proposal` published in the forged version."""
    return (
        "UPDATE reviewapp_ruleproposal SET published_in_id = {version} WHERE id = %s",
        [proposal.pk],
    )


def committed() -> None:
    """What the commit of this transaction would check, checked now (tests roll back);
    every check from then on is made at once, so last."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def test_a_version_that_no_second_person_approved_is_refused(approver, admin_user):
    proposal = proposal_create(
        user=approver, kind="require-review", change={"field": "status"}, rationale="safety"
    )
    # Nothing approved at all, or the proposer's own change published by the proposer.
    version_forged(approver)
    with pytest.raises(IntegrityError, match="proposal_four_eyes"), transaction.atomic():
        RuleProposal.objects.filter(pk=proposal.pk).update(state="approved", decided_by=approver)
    version_forged(approver, published_in(proposal), refusal="published_only_if_approved")
    # Once someone else approved it, its proposer may publish it: two people decided it.
    proposal_decide(proposal=proposal, user=admin_user, approve=True, reason="")
    version = policy_version_publish(user=approver, reason="status needs a person")
    committed()
    assert (version.number, version.published_by) == (1, approver)


def test_a_version_must_publish_the_approved_proposal_behind_it(reviewer, approver):
    proposal = proposal_create(
        user=reviewer, kind="require-review", change={"field": "status"}, rationale="safety"
    )
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="agreed")
    # An approval waiting to be published is no licence for some other document.
    version_forged(approver)
    version_forged(reviewer)
    version = policy_version_publish(user=approver, reason="status needs a person")
    assert RuleProposal.objects.get().published_in == version
    # Nor is an approval published before: a proposal is published once.
    version_forged(approver, published_in(proposal), refusal="a decided proposal cannot be changed")
    version_forged(approver)
    committed()
    assert PolicyVersion.objects.get() == version


@pytest.fixture(scope="module")
def sqlite_database(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("sqlite")
    database = folder / "guards.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "CROSSCHECK_VAR_DIR": str(folder),
        "DJANGO_SETTINGS_MODULE": "reviewapp.settings",
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    return database


def test_sqlite_refuses_update_and_delete_of_what_is_append_only(sqlite_database):
    with sqlite3.connect(sqlite_database) as db:
        names = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        for model in APPEND_ONLY:
            table = model._meta.db_table
            assert {f"{table}_no_update", f"{table}_no_delete"} <= names, table
        db.execute(
            "INSERT INTO reviewapp_auditevent (verb, target, data, created_at, channel, "
            "prev_hash, hash) VALUES ('claimed', 'ticket 1', '{}', '2026-11-30 00:00:00', "
            "'web', '', '')"
        )
        with pytest.raises(sqlite3.IntegrityError, match="append-only: UPDATE"):
            db.execute("UPDATE reviewapp_auditevent SET verb = 'rewritten'")
        with pytest.raises(sqlite3.IntegrityError, match="append-only: DELETE"):
            db.execute("DELETE FROM reviewapp_auditevent")
        assert db.execute("SELECT verb FROM reviewapp_auditevent").fetchall() == [("claimed",)]


def test_sqlite_keeps_a_decided_proposal_as_decided(sqlite_database):
    with sqlite3.connect(sqlite_database) as db:
        db.execute(
            "INSERT INTO reviewapp_ruleproposal (kind, change, sentence, rationale, "
            "proposed_by_id, created_at, base_number, state, decision_reason) VALUES "
            "('authoritative-source', '{}', 's', 'r', 1, '2026-11-30 00:00:00', 0, 'pending', '')"
        )
        db.execute("UPDATE reviewapp_ruleproposal SET state = 'approved', decided_by_id = 2")
        with pytest.raises(sqlite3.IntegrityError, match="a decided proposal cannot be changed"):
            db.execute("UPDATE reviewapp_ruleproposal SET state = 'rejected'")
        with pytest.raises(sqlite3.IntegrityError, match="a decided proposal cannot be changed"):
            db.execute("UPDATE reviewapp_ruleproposal SET rationale = 'other'")
        db.execute("UPDATE reviewapp_ruleproposal SET published_in_id = 7")
        with pytest.raises(sqlite3.IntegrityError, match="a decided proposal cannot be changed"):
            db.execute("UPDATE reviewapp_ruleproposal SET published_in_id = 8")
        with pytest.raises(sqlite3.IntegrityError, match="append-only: DELETE"):
            db.execute("DELETE FROM reviewapp_ruleproposal")


def test_sqlite_refuses_a_version_with_no_approved_proposal_waiting(sqlite_database):
    version = (
        "INSERT INTO reviewapp_policyversion (number, name, document, reason, based_on, "
        "published_by_id, published_at) VALUES (?, '', '{}', '', 0, 1, '2026-11-30')"
    )
    with sqlite3.connect(sqlite_database) as db:
        db.execute(
            "INSERT INTO reviewapp_ruleproposal (id, kind, change, sentence, rationale, "
            "proposed_by_id, created_at, base_number, state, decision_reason) VALUES (40, "
            "'require-review', '{}', 's', 'r', 1, '2026-11-30 00:00:00', 0, 'pending', '')"
        )
        with pytest.raises(sqlite3.IntegrityError, match=UNAPPROVED):
            db.execute(version, (41,))
        db.execute(
            "UPDATE reviewapp_ruleproposal SET state = 'approved', decided_by_id = 2 WHERE id = 40"
        )
        published = db.execute(version, (41,)).lastrowid
        db.execute(
            "UPDATE reviewapp_ruleproposal SET published_in_id = ? WHERE id = 40", (published,)
        )
        with pytest.raises(sqlite3.IntegrityError, match=UNAPPROVED):
            db.execute(version, (42,))


def test_sqlite_gives_a_role_with_its_audit_event(sqlite_database):
    # One role does everything on SQLite: the same one path, in Python (seed_demo uses it).
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{sqlite_database}",
        "CROSSCHECK_VAR_DIR": str(sqlite_database.parent),
        "DJANGO_SETTINGS_MODULE": "reviewapp.settings",
        "DEMO_PASSWORD": "a-demo-password",
    }
    for _ in range(2):
        subprocess.run(
            [sys.executable, "manage.py", "seed_demo", "--no-corpus"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
        )
    with sqlite3.connect(sqlite_database) as db:
        given = db.execute(
            "SELECT target, data FROM reviewapp_auditevent WHERE verb = 'account.role' "
            "ORDER BY position"
        ).fetchall()
        roles = db.execute(
            "SELECT u.username, u.is_superuser, g.name FROM auth_user u JOIN auth_user_groups m "
            "ON m.user_id = u.id JOIN auth_group g ON g.id = m.group_id WHERE u.username = 'admin'"
        ).fetchall()
    assert [target for target, _ in given] == [
        f"account {name}" for name in ("reviewer", "reviewer2", "approver", "viewer", "admin")
    ]
    assert json.loads(given[-1][1]) == {
        "role": "admin",
        "before": [],
        "superuser": True,
        "created": True,
    }
    assert roles == [("admin", 1, "admin")]


def test_sqlite_makes_only_an_active_judgement_current(sqlite_database):
    with sqlite3.connect(sqlite_database) as db:
        db.execute(
            "INSERT INTO reviewapp_run (id, run_id, agent, started_at, first_ingested_at) "
            "VALUES (1, 'r1', '', '2026-11-30', '2026-11-30')"
        )
        db.execute(
            "INSERT INTO reviewapp_policycandidate (id, kind, document, sha256, number, "
            "base_number, created_at) VALUES (1, 'draft', '{}', 'x', 1, 0, '2026-11-30')"
        )
        for pk, purpose, candidate in ((1, "active", None), (2, "shadow", 1)):
            db.execute(
                "INSERT INTO reviewapp_judgement (id, run_id, purpose, candidate_id, "
                "policy_number, through_record_id, verdict_count, conflict_count, "
                "unsafe_count, finding_count, created_at) "
                "VALUES (?, 1, ?, ?, 0, 1, 0, 0, 0, 0, '2026-11-30')",
                (pk, purpose, candidate),
            )
        db.execute("UPDATE reviewapp_run SET current_judgement_id = 1")
        with pytest.raises(sqlite3.IntegrityError, match="only an active judgement"):
            db.execute("UPDATE reviewapp_run SET current_judgement_id = 2")


# The foreign keys of lines, records and tickets are checked once per statement (guards.references
# and guards.referenced), not row by row at commit: each still refuses what one refuses.
POINTING_AT_NOTHING = 10**12


def test_postgresql_refuses_a_line_record_or_ticket_pointing_at_no_row(every_table_has_a_row):
    from reviewapp.infra.bulk import insert_rows

    record = TraceRecord.objects.first()
    assert record is not None
    columns = ("run_id", "line_id", "type", "key", "source", "data")
    for run_pk, line_pk in (
        (POINTING_AT_NOTHING, record.line_id),
        (record.run_id, POINTING_AT_NOTHING),
    ):
        row = (run_pk, line_pk, "agent_action", "", "", {"runId": "x", "type": "agent_action"})
        with pytest.raises(IntegrityError, match="points at no row"), transaction.atomic():
            insert_rows(TraceRecord, columns, [row])  # COPY, as ingest writes them
        with pytest.raises(IntegrityError, match="points at no row"), transaction.atomic():
            TraceRecord.objects.create(**dict(zip(columns, row, strict=True)))
    with pytest.raises(IntegrityError, match="points at no row"), transaction.atomic():
        TraceLine.objects.create(
            batch_id=POINTING_AT_NOTHING,
            identity="0" * 32,
            line_number=1,
            raw=b"{}",
            accepted=False,
            reason="test",
        )
    judgement = Judgement.objects.first()
    assert judgement is not None
    with pytest.raises(IntegrityError, match="points at no row"), transaction.atomic():
        Judgement.objects.create(run_id=POINTING_AT_NOTHING, policy_number=0, through_record_id=1)
    verdict_columns = ("judgement_id", "run_id", "position", "field", "kind", "evidence", "unsafe")
    for judgement_pk, run_pk in (
        (POINTING_AT_NOTHING, judgement.run_id),
        (judgement.pk, POINTING_AT_NOTHING),
    ):
        with pytest.raises(IntegrityError, match="points at no row"), transaction.atomic():
            insert_rows(
                Verdict, verdict_columns, [(judgement_pk, run_pk, 99, "f", "settled", [], False)]
            )
        with pytest.raises(IntegrityError, match="points at no row"), transaction.atomic():
            Finding.objects.create(
                judgement_id=judgement_pk, run_id=run_pk, position=99, kind="k", evidence={}
            )
    ticket = Ticket.objects.exclude(verdict=None).first()
    assert ticket is not None
    for field in ("run_id", "verdict_id", "judgement_id", "batch_id"):
        copy = {f.attname: getattr(ticket, f.attname) for f in Ticket._meta.concrete_fields} | {
            "id": None,
            "key": f"other-{field}",
            field: POINTING_AT_NOTHING,
        }
        with pytest.raises(IntegrityError, match="points at no row"), transaction.atomic():
            Ticket.objects.create(**copy)
    # Pointing at rows that are there is fine.
    with transaction.atomic():
        insert_rows(
            TraceRecord, columns, [(record.run_id, record.line_id, "agent_action", "", "", {})]
        )


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("every_table_has_a_row")
def test_postgresql_refuses_deleting_a_run_or_batch_its_records_or_lines_point_at():
    import psycopg

    from tests.roles import owner_conninfo

    # A run and a batch of their own, which nothing else (judgements, tickets) points at.
    batch = IngestBatch.objects.create(channel="cli", file_name="f", content_sha256="x")
    run = Run.objects.create(run_id="pointed-at", started_at="2026-11-30T00:00:00Z")
    line = TraceLine.objects.create(
        batch=batch, identity="1" * 32, line_number=1, raw=b"{}", accepted=True
    )
    record = TraceRecord.objects.create(run=run, line=line, type="agent_action", data={})
    # The app's role may not delete them at all: the owner is refused by the guard.
    with psycopg.connect(owner_conninfo(connection)) as owner:
        for table, pk in (
            ("reviewapp_run", record.run_id),
            ("reviewapp_ingestbatch", record.line.batch_id),
        ):
            with (
                pytest.raises(psycopg.errors.ForeignKeyViolation, match="still pointed at"),
                owner.transaction(),
            ):
                owner.execute("SET CONSTRAINTS ALL IMMEDIATE")
                owner.execute(f"DELETE FROM {table} WHERE id = %s", [pk])
    assert Run.objects.filter(pk=record.run_id).exists()
    assert IngestBatch.objects.filter(pk=record.line.batch_id).exists()


def test_sqlite_refuses_a_record_pointing_at_no_row_and_deleting_what_is_pointed_at(
    sqlite_database,
):
    with sqlite3.connect(sqlite_database) as db:
        db.execute(
            "INSERT INTO reviewapp_run (id, run_id, agent, started_at, first_ingested_at) "
            "VALUES (7, 'r7', '', '2026-11-30', '2026-11-30')"
        )
        db.execute(
            "INSERT INTO reviewapp_ingestbatch (id, public_id, channel, file_name, "
            "content_sha256, size_bytes, stored_path, state, lines, accepted, duplicates, "
            "rejected, identical, runs, tickets, ignored, bytes_done, attempts, parts, error, "
            "created_at) "
            "VALUES (7, 'b7', 'cli', 'f', 'x', 0, '', 'done', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, '', "
            "'2026-11-30')"
        )
        with pytest.raises(sqlite3.IntegrityError, match="points at no row"):
            db.execute(
                "INSERT INTO reviewapp_traceline (batch_id, identity, line_number, raw, "
                "accepted, reason, format, ignored) VALUES (8, 'i', 1, x'7b7d', 0, '', '', 0)"
            )
        db.execute(
            "INSERT INTO reviewapp_traceline (id, batch_id, identity, line_number, raw, "
            "accepted, reason, format, ignored) VALUES (7, 7, 'i', 1, x'7b7d', 1, '', '', 0)"
        )
        for run_pk, line_pk in ((8, 7), (7, 8)):
            with pytest.raises(sqlite3.IntegrityError, match="points at no row"):
                db.execute(
                    "INSERT INTO reviewapp_tracerecord (run_id, line_id, type, key, source, "
                    "data) VALUES (?, ?, 'agent_action', '', '', '{}')",
                    (run_pk, line_pk),
                )
        db.execute(
            "INSERT INTO reviewapp_tracerecord (run_id, line_id, type, key, source, data) "
            "VALUES (7, 7, 'agent_action', '', '', '{}')"
        )
        for table in ("reviewapp_run", "reviewapp_ingestbatch"):
            with pytest.raises(sqlite3.IntegrityError, match="still pointed at"):
                db.execute(f"DELETE FROM {table} WHERE id = 7")
