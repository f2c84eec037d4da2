"""A real worker: a delivery ingested while a candidate is in shadow is judged under it
once the ingest commits, and a backfill runs to its end, chunk by chunk."""

from datetime import timedelta

import pytest
from django.utils import timezone

from reviewapp.demo.corpus import demo_lines
from reviewapp.ingest.tokens import create_token
from reviewapp.judging.store import SHADOW
from reviewapp.models import IngestBatch, Judgement, Run, ShadowBackfill, ShadowBatch, Ticket
from reviewapp.shadow.backfill import backfill_start
from tests.ingest.test_worker import post_api, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_delivery_in_shadow_is_judged_by_the_worker_after_it_commits(
    worker, client, approver, draft_in_shadow
):
    _, token = create_token(user=approver, name="ci")
    body = "\n".join(
        line.replace('"demo-', '"posted-')
        for line in demo_lines(runs=50, months=1, until=timezone.now())
    )
    batch_id = post_api(client, body.encode(), token).json()["id"]
    batch = wait_for(
        lambda: IngestBatch.objects.filter(public_id=batch_id, state="done").first(),
        60,
        "the batch to finish",
    )
    tickets = list(Ticket.objects.filter(batch=batch).values_list("pk", "revision"))
    done = wait_for(
        lambda: ShadowBatch.objects.filter(batch=batch).first(), 60, "the shadow worker"
    )
    assert done.runs == 50 and done.judgements == 50
    posted = Run.objects.filter(run_id__startswith="posted-")
    shadow = Judgement.objects.filter(purpose=SHADOW, run__in=posted)
    assert shadow.count() == 50
    assert set(shadow.values_list("candidate_id", flat=True)) == {draft_in_shadow.candidate_id}
    assert not posted.filter(current_judgement__purpose=SHADOW).exists()
    assert list(Ticket.objects.filter(batch=batch).values_list("pk", "revision")) == tickets


def test_a_backfill_runs_to_its_end_on_the_worker(worker, approver, draft_in_shadow):
    today = timezone.now().date()
    backfill = backfill_start(
        draft_in_shadow,
        since=today - timedelta(days=20),
        until=today,
        user=approver,
    )
    backfill = wait_for(
        lambda: ShadowBackfill.objects.filter(pk=backfill.pk, state="done").first(),
        60,
        "the backfill to finish",
    )
    assert backfill.runs_done == backfill.runs_total > 50
    assert Judgement.objects.filter(purpose=SHADOW).count() == backfill.judgements
