"""Shadow judging: every run ingested while a candidate is in shadow is judged under it
too, stored apart; it never changes an active verdict, a current judgement or a ticket;
it is idempotent; and its comparison with the active version equals a brute-force one."""

from datetime import timedelta

import pytest
from django.db.models import Max

from reviewapp.durable import Send
from reviewapp.infra.days import Window
from reviewapp.judging.blocking import ItemFilter
from reviewapp.judging.store import ACTIVE, SHADOW
from reviewapp.models import (
    AuditEvent,
    Finding,
    IngestBatch,
    Judgement,
    Run,
    ShadowBackfill,
    ShadowBatch,
    Ticket,
    TraceRecord,
    Verdict,
)
from reviewapp.policy.candidates import candidate_of_version
from reviewapp.shadow.backfill import backfill_start, backfill_step
from reviewapp.shadow.compare import comparison, comparison_runs
from reviewapp.shadow.designations import ShadowError, shadow_end, shadow_start
from reviewapp.shadow.judging import batches_waiting, deliveries_due, shadow_judge_batch
from tests.seeding import ingest_lines, line
from tests.shadow import brute
from tests.shadow.conftest import demo_month

pytestmark = pytest.mark.django_db


def active_state():
    """Everything shadow judging must leave as it is."""
    return {
        "current": dict(Run.objects.values_list("pk", "current_judgement_id")),
        "judgements": list(
            Judgement.objects.filter(purpose=ACTIVE).order_by("pk").values_list("pk", flat=True)
        ),
        "verdicts": list(
            Verdict.objects.filter(judgement__purpose=ACTIVE)
            .order_by("pk")
            .values_list("pk", "kind", "unsafe", "reason")
        ),
        "findings": Finding.objects.filter(judgement__purpose=ACTIVE).count(),
        "tickets": list(
            Ticket.objects.order_by("pk").values_list(
                "pk", "revision", "state", "judgement_id", "verdict_id"
            )
        ),
    }


def test_shadow_judging_changes_nothing_active(draft_in_shadow, tmp_path):
    summary = demo_month(tmp_path, runs=60, seed=7, name="while-in-shadow.jsonl")
    batch = IngestBatch.objects.get(pk=max(summary.batch_pks))
    before = active_state()
    assert before["tickets"] and not Judgement.objects.filter(purpose=SHADOW).exists()

    done = shadow_judge_batch(batch.pk)

    assert done is not None and done.runs == 60 and done.judgements == 60
    assert active_state() == before
    shadow = Judgement.objects.filter(purpose=SHADOW)
    assert shadow.count() == 60
    assert set(shadow.values_list("candidate_id", flat=True)) == {draft_in_shadow.candidate_id}
    assert not Run.objects.filter(current_judgement__purpose=SHADOW).exists()
    assert not Ticket.objects.filter(judgement__purpose=SHADOW).exists()
    # Pinned at the record the current judgement covers: the two compare record for record.
    for judgement in shadow.select_related("run__current_judgement"):
        assert judgement.through_record_id == judgement.run.current_judgement.through_record_id

    # Again, and a backfill of the whole month: idempotent, and still nothing active moves.
    assert shadow_judge_batch(batch.pk) == done
    backfill = backfill_start(
        draft_in_shadow, since=brute.today() - timedelta(days=40), until=brute.today(), user=None
    )
    while backfill_step(backfill.pk):
        pass
    backfill.refresh_from_db()
    assert backfill.state == ShadowBackfill.State.DONE
    assert backfill.runs_done == backfill.runs_total == 190
    assert backfill.judgements == 130  # the 60 of the batch were judged already
    assert active_state() == before
    assert shadow.count() == 190
    assert backfill_step(backfill.pk) is False
    assert shadow.count() == 190


def test_runs_appended_later_are_judged_again_at_their_new_record(draft_in_shadow, tmp_path):
    summary = demo_month(tmp_path, runs=20, seed=9, name="first.jsonl")
    shadow_judge_batch(max(summary.batch_pks))
    run = Run.objects.filter(run_id__startswith="demo9-").order_by("pk").first()
    later = ingest_lines(
        tmp_path, [line(runId=run.run_id, type="agent_action", name="issue_store_credit")], "more"
    )
    shadow_judge_batch(max(later.batch_pks))
    run.refresh_from_db()
    last = TraceRecord.objects.filter(run=run).aggregate(last=Max("id"))["last"]
    assert run.current_judgement.through_record_id == last
    assert Judgement.objects.filter(run=run, purpose=SHADOW, through_record_id=last).exists()


def test_the_comparison_equals_a_brute_force_one(draft_in_shadow, tmp_path):
    summary = demo_month(tmp_path, runs=120, seed=11, name="while-in-shadow.jsonl")
    shadow_judge_batch(max(summary.batch_pks))
    for window in (Window.last(28), Window.last(9)):
        expected = brute.comparison(draft_in_shadow.candidate_id, window.since, window.until)
        found = comparison(draft_in_shadow, window)
        assert (found.total.new, found.total.unblocked, found.total.unchanged) == (
            len(expected["new"]),
            len(expected["unblocked"]),
            len(expected["unchanged"]),
        )
        assert found.total.new and found.total.unblocked and found.total.unchanged
        assert found.runs_compared == len(
            brute.shadow_pairs(draft_in_shadow.candidate_id, window.since, window.until)
        )
        for status, attribute in (("new", "new"), ("unblocked", "unblocked")):
            by_day = brute.counts(expected[status])["day"]
            assert {d: getattr(c, attribute) for d, c in found.by_day} == {
                d: by_day.get(d, 0) for d in window.days
            }
            by_action = brute.counts(expected[status])["action"]
            assert {
                a: getattr(c, attribute) for a, c in found.by_action if getattr(c, attribute)
            } == dict(by_action)
        # Each count drills down to its runs.
        for status in ("new", "unblocked", "unchanged"):
            found = comparison_runs(draft_in_shadow, window, ItemFilter(), status=status)
            assert found.total_items == len(expected[status])
            assert {run.pk for run in found[:]} == {item.run for item in expected[status]}
            assert {item.status for run in found[:] for item in run.items} <= {status}
    # What changes, as the document says: stale-search status messages newly blocked,
    # chargeback store credits and unchecked refunds unblocked.
    month = Window.last(28)
    expected = brute.comparison(draft_in_shadow.candidate_id, month.since, month.until)
    assert {i.action for i in expected["new"]} == {"send_status_message"}
    assert {i.reason for i in expected["unblocked"]} >= {
        "no-approved-precedence",
        "missing-prerequisite",
    }


def test_pending_runs_are_those_ingested_in_shadow_and_not_yet_judged(draft_in_shadow, tmp_path):
    summary = demo_month(tmp_path, runs=30, seed=13, name="pending.jsonl")
    window = Window.last(31)
    assert comparison(draft_in_shadow, window).runs_pending == 30
    assert batches_waiting(draft_in_shadow) == 1
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("django.conf.settings.SHADOW_REQUEUE_SECONDS", 0)
        # The reconciler would send it again.
        assert deliveries_due() == [
            Send("reviewapp.tasks.shadow_judge_batch_task", (max(summary.batch_pks),))
        ]
    shadow_judge_batch(max(summary.batch_pks))
    assert comparison(draft_in_shadow, window).runs_pending == 0
    assert batches_waiting(draft_in_shadow) == 0
    assert ShadowBatch.objects.count() == 1


def test_putting_in_and_taking_out_of_shadow_is_audited_and_guarded(
    demo_desk, draft_in_shadow, approver, tmp_path
):
    with pytest.raises(ShadowError, match="already in shadow"):
        shadow_start(draft_in_shadow.candidate, user=approver)
    with pytest.raises(ShadowError, match="is the active version"):
        shadow_start(candidate_of_version(demo_desk), user=approver)
    shadow_end(draft_in_shadow, user=approver, reason="seen enough")
    with pytest.raises(ShadowError, match="no longer in shadow"):
        shadow_end(draft_in_shadow, user=approver)
    verbs = list(AuditEvent.objects.filter(verb__startswith="shadow.").values_list("verb", "actor"))
    assert verbs == [("shadow.started", approver.pk), ("shadow.ended", approver.pk)]
    # A delivery after it left shadow is not judged under it, nor waited for.
    summary = demo_month(tmp_path, runs=5, seed=15, name="after.jsonl")
    assert shadow_judge_batch(max(summary.batch_pks)) is None
    assert not Judgement.objects.filter(purpose=SHADOW).exists()
    # In again: a new designation, the old one kept.
    again = shadow_start(draft_in_shadow.candidate, user=approver)
    assert again.pk != draft_in_shadow.pk and again.is_open


def test_a_backfill_goes_chunk_by_chunk_and_shows_its_progress(
    draft_in_shadow, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr("reviewapp.shadow.backfill.RUNS_PER_CHUNK", 40)
    backfill = backfill_start(
        draft_in_shadow, since=brute.today() - timedelta(days=40), until=brute.today(), user=None
    )
    progress = []
    with django_capture_on_commit_callbacks() as sent:
        while backfill_step(backfill.pk):
            backfill.refresh_from_db()
            progress.append((backfill.state, backfill.runs_done, backfill.progress_percent))
    backfill.refresh_from_db()
    assert progress == [("running", 40, 30), ("running", 80, 61), ("running", 120, 92)]
    assert (backfill.state, backfill.runs_done, backfill.progress_percent) == ("done", 130, 100)
    assert len(sent) == 3  # each chunk sent the next
    assert Judgement.objects.filter(purpose=SHADOW).count() == 130
