"""Replay jobs: a fixture set judged again under a candidate, in items that workers claim.

The database is the record of the work, the broker only a hint that there is some: a job
is split into items (REPLAY_CHUNK_RUNS runs each), and a task sent for a job (by name,
reviewapp.celery.Tasks) claims its items one at a time until none is left. An item is a
unit of durable work (reviewapp.durable, ITEMS): claiming it takes its lock, commits it
as running under a lease, with one more attempt; processing it (replay.work) is one
transaction that writes its results and marks it done, so an item is done once or not at
all. A worker killed mid-item loses its connection, and the item's lock with it: once its
short lease has run out, nobody holding its lock, it is claimed again (by the same task
redelivered, acks_late with reject_on_worker_lost, or by one that the reconciler sends).
An item claimed REPLAY_MAX_ATTEMPTS times without finishing fails, and with it the job
(retry sends it again): no message loops forever. Cancelling stops claims at once; an
item being processed then finishes (a chunk takes about a second)."""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from reviewapp import durable
from reviewapp.celery import Tasks
from reviewapp.durable import Durable, Send
from reviewapp.infra.locks import Space, locks_held
from reviewapp.models import FixtureRun, FixtureSet, PolicyCandidate, ReplayItem, ReplayJob
from reviewapp.policy.candidates import baseline_of
from reviewapp.replay.compare import COUNTS, sum_counts
from reviewapp.replay.work import item_process

log = logging.getLogger(__name__)

ACTIVE = (ReplayJob.State.QUEUED, ReplayJob.State.RUNNING)
ITEMS = Durable(
    name="replay item",
    model=ReplayItem,
    task=Tasks.REPLAY_JOB,
    lock=Space.REPLAY_ITEM,
    # A claim is its worker's for REPLAY_LEASE_SECONDS; after that, anyone's whose lock is free.
    pulse="lease_until",
    lease="REPLAY_LEASE_SECONDS",
    born=None,
    max_attempts="REPLAY_MAX_ATTEMPTS",
    # A job is sent, its items are claimed: what is due is read from both (jobs_due).
    due=lambda: jobs_due(),
)


class ReplayError(ValueError):
    """A replay action that cannot be done as asked; the message says why."""


def job_start(
    fixture_set: FixtureSet,
    candidate: PolicyCandidate,
    *,
    user: Any = None,
    reason: str = "",
    send: bool = True,
) -> ReplayJob:
    """A job over the fixture set's runs, in items, comparing the candidate with the version
    it builds on (its baseline); sent to workers once committed (unless `send` is False:
    the caller works on it, as `manage.py replay` does)."""
    chunk = max(1, settings.REPLAY_CHUNK_RUNS)
    ids = list(
        FixtureRun.objects.filter(fixture_set=fixture_set)
        .order_by("id")
        .values_list("id", flat=True)
    )
    baseline = baseline_of(candidate, user=user)
    with transaction.atomic():
        job = ReplayJob.objects.create(
            fixture_set=fixture_set,
            candidate=candidate,
            baseline=baseline,
            reason=reason[:200],
            started_by=user if user is not None and user.is_authenticated else None,
            item_count=-(-len(ids) // chunk),
            run_count=len(ids),
            counts=dict.fromkeys(COUNTS, 0),
            # Not sent: beat's reconciler sends it to any worker there is, to help.
            hinted_at=timezone.now() if send else None,
        )
        ReplayItem.objects.bulk_create(
            ReplayItem(
                job=job,
                seq=seq,
                first_fixture_run_id=ids[start],
                last_fixture_run_id=ids[min(start + chunk, len(ids)) - 1],
                run_count=min(start + chunk, len(ids)) - start,
            )
            for seq, start in enumerate(range(0, len(ids), chunk))
        )
        if not ids:
            finalize(job.pk)
        elif send:
            _send_on_commit(job.pk, job.item_count)
    job.refresh_from_db()
    return job


def _send_on_commit(job_id: int, items: int) -> None:
    # A broker that is down fails nothing: the reconciler sends it at its next round.
    durable.send(
        Tasks.REPLAY_JOB,
        job_id,
        copies=max(1, min(items, settings.REPLAY_TASKS_PER_JOB)),
        unsent=partial(ReplayJob.objects.filter(pk=job_id).update, hinted_at=None),
    )


def worker_token() -> str:
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def claim_next(job_id: int, token: str) -> ReplayItem | None:
    """Take the job's next queued item, or one whose worker is gone (its lease run out and
    its lock free): running, leased to `token`, one more attempt, its lock held by this
    connection until released (job_work does, once it is processed). None when there is
    nothing to take."""
    tried: list[int] | None = None
    while True:
        state = ReplayJob.objects.filter(pk=job_id).values_list("state", flat=True).first()
        if state not in ACTIVE:
            return None
        now = timezone.now()
        takeable = Q(state=ReplayItem.State.QUEUED) | Q(
            state=ReplayItem.State.RUNNING, lease_until__lt=now
        )
        candidates = list(
            ReplayItem.objects.filter(takeable, job_id=job_id)
            .order_by("seq")
            .values_list("pk", flat=True)[:8]
        )
        if not candidates or candidates == tried:
            return None  # none, or only items other workers hold
        for pk in candidates:
            # An item claimed REPLAY_MAX_ATTEMPTS times that never finished is failed here.
            item = durable.take(ITEMS, pk, when=takeable, claimed_by=token)
            if item is not None:
                ReplayJob.objects.filter(pk=job_id, state=ReplayJob.State.QUEUED).update(
                    state=ReplayJob.State.RUNNING, started_at=now
                )
                return item
        tried = candidates


def item_run(item: ReplayItem, token: str) -> None:
    """Process a claimed item; a failure is recorded on it (tried again while it has tries
    left). Two jobs of one candidate storing the same judgement at once: the loser tries
    again at once and reuses the winner's."""
    for attempt in range(2):
        try:
            item_process(item.pk, token)
            return
        except IntegrityError as exc:
            if attempt:
                _record_failure(item, token, exc)
        except Exception as exc:
            log.exception("replay item %s of job %s failed", item.pk, item.job_id)
            _record_failure(item, token, exc)
            return


def _record_failure(item: ReplayItem, token: str, exc: BaseException) -> None:
    if connection.needs_rollback or not connection.is_usable():
        connection.close()
    ours = Q(state=ReplayItem.State.RUNNING, claimed_by=token)
    error = f"{type(exc).__name__}: {exc}"[:2000]
    try:
        if item.attempts < settings.REPLAY_MAX_ATTEMPTS:  # tried again at once
            ReplayItem.objects.filter(ours, pk=item.pk).update(
                state=ReplayItem.State.QUEUED, lease_until=None, error=error
            )
        else:
            durable.fail(ITEMS, item.pk, error, only=ours)
    except Exception:  # the database is gone too: the lease runs out, beat sends it again
        log.exception("could not record the failure of replay item %s", item.pk)


def job_work(
    job_id: int,
    *,
    budget: float | None = None,
    on_item: Callable[[], None] | None = None,
) -> int:
    """Claim and process the job's items until none is left or `budget` seconds have gone
    (then the job is sent again, for whichever worker is free); items other workers hold
    are waited for only while their lease would run out within the budget. Returns how
    many items this call processed."""
    if not ReplayJob.objects.filter(pk=job_id).exists():
        return 0  # a message outliving its job (a test database emptied, say)
    budget = settings.REPLAY_TASK_SECONDS if budget is None else budget
    deadline = time.monotonic() + budget
    token, processed = worker_token(), 0
    while True:
        item = claim_next(job_id, token)
        if item is not None:
            try:
                item_run(item, token)
            finally:
                durable.release(ITEMS, item.pk)
            processed += 1
            if on_item is not None:
                on_item()
            if time.monotonic() < deadline:
                continue
            if _claimable(job_id):
                _send_on_commit(job_id, 1)
            break
        wait = _seconds_to_next_lease_end(job_id)
        if wait is None or time.monotonic() + wait > deadline:
            break
        time.sleep(min(max(wait, 0.05), 0.5))
    finalize(job_id)
    return processed


def _claimable(job_id: int) -> bool:
    return ReplayItem.objects.filter(job_id=job_id, state=ReplayItem.State.QUEUED).exists()


def _seconds_to_next_lease_end(job_id: int) -> float | None:
    """Seconds until the next item left by a worker that is gone can be claimed; None when
    every running item is being processed (its worker holds its lock) or none runs."""
    held = locks_held(Space.REPLAY_ITEM)
    leases = [
        lease_until
        for pk, lease_until in ReplayItem.objects.filter(
            job_id=job_id, state=ReplayItem.State.RUNNING
        ).values_list("pk", "lease_until")
        if pk not in held and lease_until is not None
    ]
    if not leases:
        return None
    return max(0.0, (min(leases) - timezone.now()).total_seconds())


def finalize(job_id: int) -> ReplayJob:
    """End the job once no item is queued or running: done, or failed if an item failed;
    its counts and result hash from its items'."""
    with transaction.atomic():
        job = ReplayJob.objects.select_for_update().get(pk=job_id)
        if job.state not in ACTIVE:
            return job
        items = list(job.items.order_by("seq").values_list("state", "counts", "digest", "error"))
        if any(state in (ReplayItem.State.QUEUED, ReplayItem.State.RUNNING) for state, *_ in items):
            return job
        failed = [error for state, _, _, error in items if state == ReplayItem.State.FAILED]
        job.counts = sum_counts(
            counts for state, counts, _, _ in items if state == ReplayItem.State.DONE
        )
        job.finished_at = timezone.now()
        if failed:
            job.state = ReplayJob.State.FAILED
            job.error = f"{len(failed)} of {len(items)} items failed; the first: {failed[0]}"[:2000]
        else:
            job.state = ReplayJob.State.DONE
            job.result_sha256 = _result_sha256(digest for _, _, digest, _ in items)
        job.started_at = job.started_at or job.finished_at
        job.save()
    return job


def _result_sha256(digests: Any) -> str:
    total = hashlib.sha256()
    for digest in digests:
        total.update(digest.encode())
    return total.hexdigest()


def job_cancel(job: ReplayJob, *, user: Any = None) -> bool:
    """Stop a job: no item is claimed from now on (one being processed finishes)."""
    with transaction.atomic():
        stopped = ReplayJob.objects.filter(pk=job.pk, state__in=ACTIVE).update(
            state=ReplayJob.State.CANCELLED,
            cancelled_by=user if user is not None and user.is_authenticated else None,
            finished_at=timezone.now(),
        )
        if stopped:
            job.items.filter(state=ReplayItem.State.QUEUED).update(state=ReplayItem.State.CANCELLED)
    return bool(stopped)


def job_retry(job: ReplayJob, *, user: Any = None) -> bool:
    """Send a failed or cancelled job again: its items not done are queued with their tries
    counted afresh; results already written are kept."""
    with transaction.atomic():
        again = ReplayJob.objects.filter(
            pk=job.pk, state__in=(ReplayJob.State.FAILED, ReplayJob.State.CANCELLED)
        ).update(
            state=ReplayJob.State.RUNNING,
            error="",
            finished_at=None,
            cancelled_by=None,
            hinted_at=timezone.now(),
        )
        if not again:
            return False
        job.items.filter(state__in=(ReplayItem.State.FAILED, ReplayItem.State.CANCELLED)).update(
            state=ReplayItem.State.QUEUED, attempts=0, error="", lease_until=None
        )
        remaining = job.items.exclude(state=ReplayItem.State.DONE).count()
        if remaining:
            _send_on_commit(job.pk, remaining)
        else:
            transaction.on_commit(lambda: finalize(job.pk))
    return True


def jobs_due() -> list[Send]:
    """What the reconciler (reviewapp.durable) sends again: the jobs nobody works on
    although they have items to take (a lost message, a worker killed with everything it
    held, a task out of time), once REPLAY_REQUEUE_SECONDS have passed since workers were
    last told of them. A job whose items have all ended but that was never finalized is
    ended here."""
    now = timezone.now()
    quiet = now - timedelta(seconds=settings.REPLAY_REQUEUE_SECONDS)
    held = locks_held(Space.REPLAY_ITEM)
    due: list[Send] = []
    for job_id, hinted_at in ReplayJob.objects.filter(state__in=ACTIVE).values_list(
        "pk", "hinted_at"
    ):
        items = ReplayItem.objects.filter(job_id=job_id)
        running = list(
            items.filter(state=ReplayItem.State.RUNNING).values_list("pk", "lease_until")
        )
        left = [
            pk
            for pk, lease_until in running
            if pk not in held and (lease_until is None or lease_until < now)
        ]
        # Worked on: being processed (its lock held), or claimed so recently its lease runs.
        worked_on = len(running) > len(left)
        takeable = items.filter(state=ReplayItem.State.QUEUED).count() + len(left)
        if not worked_on and not takeable:
            finalize(job_id)
        elif takeable and not worked_on and (hinted_at is None or hinted_at < quiet):
            ReplayJob.objects.filter(pk=job_id).update(hinted_at=now)
            due += [Send(Tasks.REPLAY_JOB, (job_id,))] * min(
                takeable, settings.REPLAY_TASKS_PER_JOB
            )
    return due


@dataclass(frozen=True)
class Progress:
    """How far a job is, from its items: what the progress bar and `manage.py replay` show."""

    items: int
    items_done: int
    runs: int
    runs_done: int
    running: int
    failed: int
    counts: dict[str, int]

    @property
    def percent(self) -> int:
        if not self.runs:
            return 100 if self.items == self.items_done else 0
        return min(100, int(self.runs_done * 100 / self.runs))


def job_progress(job: ReplayJob) -> Progress:
    rows = list(job.items.values_list("state", "run_count", "counts"))
    done = [(runs, counts) for state, runs, counts in rows if state == ReplayItem.State.DONE]
    return Progress(
        items=len(rows),
        items_done=len(done),
        runs=sum(runs for _, runs, _ in rows),
        runs_done=sum(runs for runs, _ in done),
        running=sum(state == ReplayItem.State.RUNNING for state, _, _ in rows),
        failed=sum(state == ReplayItem.State.FAILED for state, _, _ in rows),
        counts=job.counts if job.state == ReplayJob.State.DONE else sum_counts(c for _, c in done),
    )
