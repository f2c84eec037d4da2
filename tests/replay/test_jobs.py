"""Replay jobs processed in-process, through the same functions workers run: what they
find equals the engine's verdicts, they change nothing recorded, a second replay reuses
the first's judgements, and claims, leases, tries, cancel and retry behave."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from reviewapp.durable import Send
from reviewapp.models import ReplayItem, ReplayJob, ReplayResult
from reviewapp.policy.candidates import candidate_of_draft, candidate_of_proposal
from reviewapp.replay.fixtures import freeze_open_tickets
from reviewapp.replay.jobs import (
    claim_next,
    job_cancel,
    job_progress,
    job_retry,
    job_start,
    job_work,
    jobs_due,
    worker_token,
)
from reviewapp.replay.work import item_process
from tests.replay.conftest import propose_owner
from tests.replay.helpers import (
    changed_groups,
    engine_verdicts,
    recorded_state,
    replay_judgements,
    replayed_verdicts,
    result_groups,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def chunks_of_four(settings):
    settings.REPLAY_CHUNK_RUNS = 4


@pytest.fixture
def job(small_desk, reviewer, chunks_of_four):
    candidate = candidate_of_proposal(propose_owner(reviewer))
    return job_start(freeze_open_tickets(user=reviewer), candidate, user=reviewer, send=False)


def test_a_replay_finds_what_the_engine_says_and_changes_nothing_recorded(job):
    before = recorded_state()
    assert (job.state, job.item_count, job.run_count) == ("queued", 7, 25)
    assert job_work(job.pk, budget=60) == 7
    job.refresh_from_db()
    assert job.state == "done" and job.started_at and job.finished_at
    assert replayed_verdicts(job) == engine_verdicts(job)
    assert sorted(result_groups(job)) == sorted(changed_groups(job))
    # Order-ledger owns status: its 17 conflicts are settled, refund-service's 8 are not.
    counts = job.counts
    assert (counts["groups"], counts["newly_resolved"], counts["tickets_settled"]) == (25, 17, 17)
    assert (counts["unchanged"], counts["newly_safe"], counts["newly_conflict"]) == (8, 17, 0)
    settled = ReplayResult.objects.filter(job=job, settles_ticket=True)
    assert {r.ticket.run.run_id for r in settled} == {
        f"run-{n}" for n in range(30) if n % 3 and n % 7
    }
    assert recorded_state() == before
    assert job_progress(job).percent == 100


def test_a_second_replay_of_the_candidate_reuses_its_judgements(job, reviewer):
    job_work(job.pk, budget=60)
    judged = replay_judgements()
    again = job_start(job.fixture_set, job.candidate, user=reviewer, send=False)
    job_work(again.pk, budget=60)
    again.refresh_from_db()
    job.refresh_from_db()
    assert replay_judgements() == judged == 25
    assert again.counts == job.counts
    assert again.result_sha256 == job.result_sha256 != ""


def test_another_candidate_judges_again_and_finds_otherwise(job, reviewer):
    job_work(job.pk, budget=60)
    draft = job_start(job.fixture_set, candidate_of_draft(user=reviewer), send=False)
    job_work(draft.pk, budget=60)
    draft.refresh_from_db()
    assert replay_judgements() == 50
    assert draft.counts["unchanged"] == draft.counts["groups"] == 25
    assert draft.result_sha256 != job.result_sha256


def test_an_item_is_done_once_whoever_claims_it(job):
    first, second = worker_token(), worker_token()
    item = claim_next(job.pk, first)
    assert (item.seq, item.state, item.attempts) == (0, "running", 1)
    # Its worker went quiet: once the lease has run out, another claims it.
    assert claim_next(job.pk, second).seq == 1
    ReplayItem.objects.filter(pk=item.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    again = claim_next(job.pk, second)
    assert (again.pk, again.attempts) == (item.pk, 2)
    assert item_process(again.pk, second)
    # The first worker comes back: the item is not its own any more, and nothing is doubled.
    assert not item_process(item.pk, first)
    done = ReplayItem.objects.get(pk=item.pk).counts
    assert ReplayResult.objects.filter(job=job).count() == done["groups"] - done["unchanged"]


def test_an_item_claimed_too_often_fails_the_job_and_retry_finishes_it(job, settings):
    settings.REPLAY_MAX_ATTEMPTS = 2
    for _ in range(2):
        item = claim_next(job.pk, worker_token())
        ReplayItem.objects.filter(pk=item.pk).update(
            lease_until=timezone.now() - timedelta(seconds=1)
        )
    job_work(job.pk, budget=60)
    job.refresh_from_db()
    assert job.state == "failed"
    assert "its worker died in each of 2 tries" in job.error
    assert ReplayItem.objects.filter(job=job, state="failed").count() == 1
    assert job_retry(job)
    job_work(job.pk, budget=60)
    job.refresh_from_db()
    assert (job.state, job.counts["groups"]) == ("done", 25)


def test_cancel_stops_claims_and_retry_resumes(job):
    token = worker_token()
    assert item_process(claim_next(job.pk, token).pk, token)
    assert job_cancel(job)
    assert claim_next(job.pk, token) is None
    job.refresh_from_db()
    assert job.state == "cancelled"
    assert job_progress(job).items_done == 1
    assert not job_cancel(job)
    assert job_retry(job)
    job_work(job.pk, budget=60)
    job.refresh_from_db()
    assert (job.state, job.counts["groups"]) == ("done", 25)
    assert ReplayResult.objects.filter(job=job).count() == 17


def test_beat_sends_again_a_job_nobody_works_on(job, settings):
    settings.REPLAY_REQUEUE_SECONDS = 0
    ReplayJob.objects.filter(pk=job.pk).update(hinted_at=timezone.now() - timedelta(seconds=5))
    # As many tasks as workers may share it (REPLAY_TASKS_PER_JOB), for its 7 items.
    assert jobs_due() == [Send("reviewapp.tasks.replay_job_task", (job.pk,))] * 4
    job.refresh_from_db()
    assert job.hinted_at > timezone.now() - timedelta(seconds=5)
    # Once every item has ended, it ends the job that nobody finalized.
    token = worker_token()
    while (item := claim_next(job.pk, token)) is not None:
        item_process(item.pk, token)
    assert jobs_due() == []
    job.refresh_from_db()
    assert job.state == "done"
