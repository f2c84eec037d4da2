"""What the database refuses: every append-only model refuses UPDATE, DELETE and TRUNCATE;
a decided proposal keeps its decision; a policy version publishes a proposal someone other
than its proposer approved; only an active judgement is a run's current one or opens a
ticket; no row points at no row (foreign keys, and guards.references for lines and records)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
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
    FrozenDiscrepancy,
    GateAnswer,
    GateMode,
    IngestBatch,
    Judgement,
    MonthClosing,
    PolicyCandidate,
    PolicyVersion,
    ProspectiveSettlement,
    RedactionRuleSet,
    ReplayResult,
    RuleProposal,
    Run,
    ShadowBatch,
    SuggestionDismissal,
    Ticket,
    TicketComment,
    TicketMark,
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
from reviewapp.review.changes import ticket_close, ticket_comment
from reviewapp.review.marks import NONE_RIGHT

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
    FrozenDiscrepancy,
    Judgement,
    MonthClosing,
    PolicyCandidate,
    PolicyVersion,
    ProspectiveSettlement,
    RedactionRuleSet,
    ShadowBatch,
    ReplayResult,
    SuggestionDismissal,
    TicketComment,
    TicketMark,
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
    RedactionRuleSet.objects.create(
        number=1, document={"rules": []}, reason="r", created_by=approver
    )
    closing = MonthClosing.objects.create(
        month=date(2026, 8, 1), action="closed", figures={}, time_zone="UTC", actor=approver
    )
    FrozenDiscrepancy.objects.create(
        closing=closing, run=ticket.run, origin="conflict", policy_number=0, outcome="open"
    )
    fixture_set = freeze_ticket(ticket, user=reviewer)
    suite_mark(fixture_set, in_suite=True, user=reviewer)
    job = job_start(fixture_set, candidate_of_version(version), user=reviewer, send=False)
    job_work(job.pk, budget=30)
    ticket.refresh_from_db()
    ticket_close(
        ticket,
        revision=ticket.revision,
        actor=reviewer,
        resolution="explained",
        cause="replica-lag",
        right=NONE_RIGHT,
    )
    SuggestionDismissal.objects.create(
        key="k", evidence_stamp="1:1", reason="r", dismissed_by=approver
    )
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


# What ingest writes points at rows by real foreign keys (deferrable, checked when the
# transaction commits), but for a line's batch and a record's run and line, checked once
# per statement (guards.references): each refuses a row pointing at no row, and deleting
# a row still pointed at.
POINTING_AT_NOTHING = 10**12
NO_ROW = "violates foreign key constraint|points at no row"
POINTED_AT = "violates foreign key constraint|still pointed at"


@contextmanager
def refused_as_pointing_at_no_row() -> Iterator[None]:
    """The statements of the block, checked as their commit would check them: refused."""
    with pytest.raises(IntegrityError, match=NO_ROW), transaction.atomic():
        yield
        committed()


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
        with refused_as_pointing_at_no_row():
            insert_rows(TraceRecord, columns, [row])  # COPY, as ingest writes them
        with refused_as_pointing_at_no_row():
            TraceRecord.objects.create(**dict(zip(columns, row, strict=True)))
    with refused_as_pointing_at_no_row():
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
    with refused_as_pointing_at_no_row():
        Judgement.objects.create(run_id=POINTING_AT_NOTHING, policy_number=0, through_record_id=1)
    verdict_columns = ("judgement_id", "run_id", "position", "field", "kind", "evidence", "unsafe")
    for judgement_pk, run_pk in (
        (POINTING_AT_NOTHING, judgement.run_id),
        (judgement.pk, POINTING_AT_NOTHING),
    ):
        with refused_as_pointing_at_no_row():
            insert_rows(
                Verdict, verdict_columns, [(judgement_pk, run_pk, 99, "f", "settled", [], False)]
            )
        with refused_as_pointing_at_no_row():
            Finding.objects.create(
                judgement_id=judgement_pk, run_id=run_pk, position=99, kind="k", evidence={}
            )
    ticket = Ticket.objects.exclude(verdict=None).first()
    assert ticket is not None
    for field in ("run_id", "verdict_id", "finding_id", "judgement_id", "batch_id"):
        copy = {f.attname: getattr(ticket, f.attname) for f in Ticket._meta.concrete_fields} | {
            "id": None,
            "key": f"other-{field}",
            field: POINTING_AT_NOTHING,
        }
        with refused_as_pointing_at_no_row():
            Ticket.objects.create(**copy)
    # Pointing at rows that are there is fine.
    with transaction.atomic():
        insert_rows(
            TraceRecord, columns, [(record.run_id, record.line_id, "agent_action", "", "", {})]
        )
        committed()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("every_table_has_a_row")
def test_postgresql_refuses_deleting_a_run_or_batch_its_records_or_lines_point_at():
    import psycopg

    from tests.roles import owner_conninfo

    # Runs and batches of their own: pointed at by a record or a line only, or by a
    # judgement or a ticket only.
    batch = IngestBatch.objects.create(channel="cli", file_name="f", content_sha256="x")
    run = Run.objects.create(run_id="pointed-at", started_at="2026-11-30T00:00:00Z")
    line = TraceLine.objects.create(
        batch=batch, identity="1" * 32, line_number=1, raw=b"{}", accepted=True
    )
    TraceRecord.objects.create(run=run, line=line, type="agent_action", data={})
    judged = Run.objects.create(run_id="judged", started_at="2026-11-30T00:00:00Z")
    Judgement.objects.create(run=judged, policy_number=0, through_record_id=1)
    ticket = Ticket.objects.first()
    assert ticket is not None
    ticketed = IngestBatch.objects.create(channel="cli", file_name="g", content_sha256="y")
    Ticket.objects.filter(pk=ticket.pk).update(batch=ticketed)
    pointed_at = [("reviewapp_run", run.pk), ("reviewapp_ingestbatch", batch.pk)]
    pointed_at += [("reviewapp_run", judged.pk), ("reviewapp_ingestbatch", ticketed.pk)]
    # The app's role may not delete them at all: the owner is refused by the foreign keys.
    with psycopg.connect(owner_conninfo(connection)) as owner:
        for table, pk in pointed_at:
            with (
                pytest.raises(psycopg.errors.ForeignKeyViolation, match=POINTED_AT),
                owner.transaction(),
            ):
                owner.execute("SET CONSTRAINTS ALL IMMEDIATE")
                owner.execute(f"DELETE FROM {table} WHERE id = %s", [pk])
    for table, pk in pointed_at:
        model = Run if table == "reviewapp_run" else IngestBatch
        assert model.objects.filter(pk=pk).exists()
