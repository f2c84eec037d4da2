"""Retention (issue 30, part 3): after the window no raw payload older than it is anywhere in
the database, while runs, verdicts, findings, tickets, tallies and the audit trail are as
they were; lines inside the window are untouched; a re-delivered expired line is still a
duplicate; the run's pages say its raw data expired, and replay skips it, counted."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from reviewapp.judging.core import stored_runs
from reviewapp.models import (
    AuditEvent,
    Finding,
    IngestBatch,
    Judgement,
    Run,
    Ticket,
    TraceLine,
    TraceRecord,
    Verdict,
)
from reviewapp.policy.candidates import candidate_of_proposal
from reviewapp.policy.versions import proposal_create
from reviewapp.privacy.retention import Windows, expire_raw_payloads
from reviewapp.replay.fixtures import freeze_ticket
from reviewapp.replay.jobs import job_start, job_work
from reviewapp.reports.calendar import month_add
from reviewapp.reports.entries import tallies_refresh
from reviewapp.reports.tally import DIMENSIONS, breakdown_counts, month_tallies
from tests.privacy.scan import columns_holding
from tests.privacy.traces import (
    NEW_MARKER,
    OLD_MARKER,
    OTLP_MARKER,
    deliver,
    new_content,
    old_content,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def delivered(tmp_path):
    """The old delivery, arrived 40 days ago, and a recent one."""
    old = deliver(tmp_path, "old.jsonl", old_content())
    new = deliver(tmp_path, "new.jsonl", new_content())
    IngestBatch.objects.filter(pk__in=old.batch_pks).update(
        created_at=timezone.now() - timedelta(days=40)
    )
    return old, new


def decided() -> dict[str, list]:
    """What was decided and counted, to compare before and after expiring."""
    tallies_refresh()
    now = timezone.now().date().replace(day=1)
    months = [month_add(now, -1), now]
    breakdowns = breakdown_counts(months)
    return {
        "tickets": list(
            Ticket.objects.order_by("pk").values_list(
                "pk", "kind", "state", "field", "entity", "reason", "unsafe", "disputed"
            )
        ),
        "verdicts": list(
            Verdict.objects.order_by("pk").values_list("pk", "kind", "value", "unsafe", "evidence")
        ),
        "findings": list(Finding.objects.order_by("pk").values_list("pk", "kind", "evidence")),
        "current": list(Run.objects.order_by("pk").values_list("pk", "current_judgement_id")),
        "judgements": list(Judgement.objects.order_by("pk").values_list("pk")),
        "tallies": [
            (t.month, t.runs, t.groups, t.counts.as_dict() if t.counts else None)
            for t in month_tallies(*months)
        ],
        "breakdowns": [
            {key: counts.as_dict() for key, counts in breakdowns[month][name].items()}
            for month in months
            for name in DIMENSIONS
        ],
    }


def old_lines() -> list[TraceLine]:
    return list(TraceLine.objects.filter(batch__file_name__endswith="old.jsonl").order_by("id"))


@override_settings(TRACE_RETENTION_DAYS=30)
def test_after_the_window_no_old_payload_is_left_and_what_was_decided_is_unchanged(
    delivered, tmp_path
):
    assert Ticket.objects.filter(run__run_id="old-run").exists()
    before = decided()
    originals = {line.pk: bytes(line.raw) for line in old_lines()}
    kept = {
        line.pk: (line.identity, line.line_number, line.batch_id, line.accepted)
        for line in old_lines()
    }
    recent = dict(
        TraceLine.objects.filter(batch__file_name__endswith="new.jsonl").values_list("pk", "raw")
    )
    external = TraceRecord.objects.filter(line_id__in=originals, data__isnull=False)
    assert external.exists()
    for marker in (OLD_MARKER, OTLP_MARKER):
        assert "reviewapp_traceline.raw" in columns_holding(marker)
    assert "reviewapp_tracerecord.data" in columns_holding(OTLP_MARKER)

    done = expire_raw_payloads()

    assert done.lines == len(originals) == 7
    assert done.bytes == sum(len(raw) for raw in originals.values())
    assert columns_holding(OLD_MARKER) == []
    assert columns_holding(OTLP_MARKER) == []
    assert columns_holding(NEW_MARKER) == ["reviewapp_traceline.raw"]
    for line in old_lines():
        assert bytes(line.raw) == b"" and line.expired_at is not None
        assert line.raw_sha256 == hashlib.sha256(originals[line.pk]).hexdigest()
        assert line.raw_size == len(originals[line.pk])
        assert (line.identity, line.line_number, line.batch_id, line.accepted) == kept[line.pk]
    assert not TraceRecord.objects.filter(line_id__in=originals, data__isnull=False).exists()
    for pk, raw in recent.items():
        line = TraceLine.objects.get(pk=pk)
        assert bytes(line.raw) == bytes(raw) and line.expired_at is None
    assert Run.objects.get(run_id="old-run").retention_days == 30
    assert Run.objects.get(run_id="new-run").raw_expired_at is None
    assert decided() == before

    event = AuditEvent.objects.get(verb="trace.expired")
    assert event.data["lines"] == 7 and event.data["retention_days"] == 30
    assert event.data["cutoff"]
    # Nothing more to expire: no second event.
    assert expire_raw_payloads().lines == 0
    assert AuditEvent.objects.filter(verb="trace.expired").count() == 1

    # Re-delivered, the expired lines (the `seq` one and the OTLP export too) are duplicates.
    lines = TraceLine.objects.count()
    again = deliver(tmp_path, "again.jsonl", old_content())
    assert (again.accepted, again.rejected, again.duplicates) == (0, 0, 7)
    assert TraceLine.objects.count() == lines
    assert decided() == before


@override_settings(TRACE_RETENTION_DAYS=30)
def test_an_expired_run_is_not_judged_again_and_its_pages_say_its_raw_data_expired(
    delivered, client, reviewer
):
    run = Run.objects.get(run_id="old-run")
    ticket = Ticket.objects.filter(run=run).first()
    client.force_login(reviewer)
    assert client.get(reverse("ticket-detail", args=[ticket.pk])).status_code == 200
    expire_raw_payloads()

    assert stored_runs([run.pk]) == []
    assert [r.run_id for r in stored_runs(Run.objects.values_list("pk", flat=True))] == ["new-run"]
    expected = f"Raw data expired on {timezone.now():%Y-%m-%d} (retention 30 days)"
    for url in (reverse("run-detail", args=[run.pk]), reverse("ticket-detail", args=[ticket.pk])):
        page = client.get(url)
        assert page.status_code == 200, url
        assert expected in " ".join(page.content.decode().split()), url
    page = client.get(reverse("ticket-detail", args=[ticket.pk])).content.decode()
    assert "Their values went with the run" in page
    # The handoff package and the batch's page read what is left, and do not fail.
    assert client.get(reverse("ticket-handoff", args=[ticket.pk])).status_code == 200
    batch = IngestBatch.objects.get(file_name__endswith="old.jsonl")
    assert client.get(reverse("batch-detail", args=[batch.public_id])).status_code == 200
    recent = Ticket.objects.filter(run__run_id="new-run").first()
    assert (
        "Raw data expired"
        not in client.get(reverse("ticket-detail", args=[recent.pk])).content.decode()
    )


@override_settings(TRACE_RETENTION_DAYS=30)
def test_replay_skips_an_expired_run_and_counts_it(delivered, reviewer):
    ticket = Ticket.objects.filter(run__run_id="old-run").first()
    fixture_set = freeze_ticket(ticket, user=reviewer)
    expire_raw_payloads()
    proposal = proposal_create(
        user=reviewer,
        kind="authoritative-source",
        change={"field": "status", "source": "refund-service"},
        rationale="refunds are the refund service's",
    )
    job = job_start(fixture_set, candidate_of_proposal(proposal), user=reviewer, send=False)
    job_work(job.pk, budget=30)
    job.refresh_from_db()
    assert job.state == "done", job.error
    assert job.counts["runs_expired"] == job.counts["runs"] >= 1
    assert job.counts["groups"] == 0


def test_a_line_falls_under_the_shortest_window_of_its_sources():
    windows = Windows(default=90, by_source={"refund-service": 7, "order-ledger": 0})
    assert windows.of_line([]) == 90
    assert windows.of_line(["order-ledger"]) == 0
    assert windows.of_line(["order-ledger", "refund-service"]) == 7
    assert windows.of_line(["search-index", "order-ledger"]) == 90
    assert Windows().shortest == 0 and windows.shortest == 7


def test_nothing_expires_without_a_window(delivered):
    assert expire_raw_payloads().lines == 0
    assert not TraceLine.objects.filter(expired_at__isnull=False).exists()


def test_a_source_window_expires_only_that_sources_lines(delivered):
    windows = Windows(default=0, by_source={"refund-service": 30})
    done = expire_raw_payloads(windows=windows)
    expired = TraceLine.objects.filter(expired_at__isnull=False)
    assert done.lines == expired.count() == 1  # old-run's refund-service observation
    assert set(TraceRecord.objects.filter(line__in=expired).values_list("source", flat=True)) == {
        "refund-service"
    }
    assert Run.objects.get(run_id="old-run").raw_expired_at is not None


@override_settings(TRACE_RETENTION_DAYS=30)
def test_beats_task_expires_what_is_due(delivered):
    from reviewapp.tasks import expire_raw_payloads_task

    external = TraceRecord.objects.filter(data__isnull=False).count()
    assert external == 5  # the OTLP export's converted records
    done = expire_raw_payloads_task()
    expired = Run.objects.filter(raw_expired_at__isnull=False)
    assert done == {"lines": 7, "records": external, "runs": expired.count()}
    assert not TraceRecord.objects.filter(data__isnull=False).exists()
    assert {"old-run", "old-seq"} <= set(expired.values_list("run_id", flat=True))
    assert not expired.filter(run_id="new-run").exists()


def test_lines_expire_a_chunk_at_a_time_with_the_same_result(delivered):
    done = expire_raw_payloads(windows=Windows(default=30), chunk=2)
    assert (done.lines, done.records) == (7, 5)
    assert not TraceLine.objects.filter(
        batch__file_name__endswith="old.jsonl", expired_at__isnull=True
    ).exists()
    # Every line of the old batch gone: it is not read again; the recent one is untouched.
    assert IngestBatch.objects.get(file_name__endswith="old.jsonl").raw_expired_at is not None
    assert IngestBatch.objects.get(file_name__endswith="new.jsonl").raw_expired_at is None
