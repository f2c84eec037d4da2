"""Shadow mode: candidate policies (a draft, a proposal applied to it, a published version)
judging every newly ingested run beside the active one, stored apart.

An approver puts a candidate in shadow, and takes it out (a ShadowDesignation; each change
an AuditEvent). Once a delivery's ingest has committed, a worker judges the runs it
touched under every candidate that was in shadow when it finished (shadow_judge_batch,
sent by name from ingest), pinned at the record their current judgement covers, so that
the two judgements of a run compare record for record. Those are SHADOW judgements
(judging.store): never a run's current one, never a ticket (the database refuses both).
A ShadowBatch row says a delivery is done; beat sends again any that is not
(shadow_catch_up). Judging is idempotent per run, candidate and last record.

A backfill judges the runs of a past window under a candidate in shadow, prospectively,
in chunks (replay.backfill)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from reviewapp.celery import app
from reviewapp.engine import Policy
from reviewapp.ingest.batches import RUNS_OF_BATCHES
from reviewapp.judging.core import RunToJudge, judge, stored_runs
from reviewapp.judging.policies import latest_version
from reviewapp.judging.store import SHADOW, judgements_store
from reviewapp.models import (
    AuditEvent,
    IngestBatch,
    Judgement,
    PolicyCandidate,
    PolicyVersion,
    RuleProposal,
    Run,
    ShadowBatch,
    ShadowDesignation,
)
from reviewapp.policy.candidates import (
    candidate_of_draft,
    candidate_of_proposal,
    candidate_of_version,
    candidate_ref,
    policy_of_candidate,
)

log = logging.getLogger(__name__)

# The tasks (reviewapp.tasks) a worker runs these with, sent by name.
SHADOW_TASK = "reviewapp.tasks.shadow_judge_batch_task"
RUNS_PER_BLOCK = 500


class ShadowError(ValueError):
    """A shadow action that cannot be done as asked; the message says why."""


def _audit(actor: Any, verb: str, designation: ShadowDesignation, **data: Any) -> None:
    AuditEvent.objects.create(
        actor=actor if actor is not None and actor.is_authenticated else None,
        verb=verb,
        target=f"{designation.candidate.label} in shadow",
        data={"designation": designation.pk, "candidate": designation.candidate_id, **data},
    )


def candidate_choices() -> list[tuple[str, str]]:
    """What can be put in shadow, as (choice, label): the draft, each pending or approved
    unpublished proposal applied to it, each published version but the active one."""
    active = latest_version()
    number = active.number if active else 0
    choices = [("draft", f"v{number + 1} draft: the active version with every approved change")]
    proposals = RuleProposal.objects.filter(
        state__in=[RuleProposal.State.PENDING, RuleProposal.State.APPROVED],
        published_in__isnull=True,
    ).order_by("-id")[:50]
    choices += [
        (f"proposal-{p.pk}", f"v{number + 1} draft with proposal #{p.pk} ({p.state}): {p.sentence}")
        for p in proposals
    ]
    versions = PolicyVersion.objects.exclude(number=number).order_by("-number")[:50]
    choices += [(f"version-{v.number}", f"v{v.number}, published") for v in versions]
    return choices


def candidate_choose(choice: str, *, user: Any) -> PolicyCandidate:
    """The candidate a choice of candidate_choices names (made when first chosen)."""
    kind, _, ident = choice.partition("-")
    if kind == "draft":
        return candidate_of_draft(user=user)
    if kind == "proposal" and ident.isdecimal():
        proposal = RuleProposal.objects.filter(pk=int(ident), published_in__isnull=True).first()
        if proposal is not None and proposal.state != RuleProposal.State.REJECTED:
            return candidate_of_proposal(proposal, user=user)
    if kind == "version" and ident.isdecimal():
        version = PolicyVersion.objects.filter(number=int(ident)).first()
        if version is not None:
            return candidate_of_version(version, user=user)
    raise ShadowError(f"nothing to put in shadow under {choice!r}")


def shadow_start(candidate: PolicyCandidate, *, user: Any, reason: str = "") -> ShadowDesignation:
    """Put a candidate in shadow beside the active version, from now on."""
    active = latest_version()
    if candidate.kind == PolicyCandidate.Kind.VERSION and candidate.version_id == (
        active.pk if active else None
    ):
        raise ShadowError(f"{candidate.label} is the active version: nothing to compare it with")
    try:
        with transaction.atomic():
            designation = ShadowDesignation.objects.create(
                candidate=candidate,
                reason=reason.strip(),
                started_by=user if user is not None and user.is_authenticated else None,
            )
            _audit(user, "shadow.started", designation, reason=reason.strip())
    except IntegrityError:
        raise ShadowError(f"{candidate.label} is already in shadow") from None
    return designation


def shadow_end(designation: ShadowDesignation, *, user: Any, reason: str = "") -> None:
    """Take a candidate out of shadow: runs ingested from now on are not judged under it;
    what it judged is kept."""
    with transaction.atomic():
        ended = ShadowDesignation.objects.filter(pk=designation.pk, ended_at__isnull=True).update(
            ended_at=timezone.now(),
            ended_by=user if user is not None and user.is_authenticated else None,
        )
        if not ended:
            raise ShadowError(f"{designation.candidate.label} is no longer in shadow")
        _audit(user, "shadow.ended", designation, reason=reason.strip())
    designation.refresh_from_db()


def open_designations() -> list[ShadowDesignation]:
    return list(
        ShadowDesignation.objects.filter(ended_at__isnull=True)
        .select_related("candidate", "candidate__proposal", "started_by")
        .order_by("started_at", "id")
    )


def designations_at(moment: datetime) -> list[ShadowDesignation]:
    """The candidates in shadow at that moment."""
    return list(
        ShadowDesignation.objects.filter(started_at__lte=moment)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gte=moment))
        .select_related("candidate")
        .order_by("started_at", "id")
    )


# --- judging ingested runs in shadow ----------------------------------------------------


def shadow_judge_batch(batch_id: int) -> ShadowBatch | None:
    """What the worker runs once a delivery is ingested: judge the runs it touched under
    every candidate in shadow when it finished. Safe to run again, and twice at once."""
    batch = IngestBatch.objects.filter(pk=batch_id).first()
    if batch is None or batch.state != IngestBatch.State.DONE or batch.finished_at is None:
        return None  # a batch not (yet) ingested, or from another database
    done = ShadowBatch.objects.filter(batch=batch).first()
    if done is not None:
        return done
    designations = designations_at(batch.finished_at)
    if not designations:
        return None
    run_pks = runs_of_batch(batch.pk)
    judged = shadow_judge_runs(run_pks, [d.candidate for d in designations])
    try:
        with transaction.atomic():
            return ShadowBatch.objects.create(batch=batch, runs=len(run_pks), judgements=judged)
    except IntegrityError:  # another worker finished it a moment ago
        return ShadowBatch.objects.get(batch=batch)


def runs_of_batch(batch_pk: int) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(RUNS_OF_BATCHES.format(placeholders="%s"), [batch_pk])
        return sorted(run_pk for (run_pk,) in cursor.fetchall())


def shadow_judge_runs(
    run_pks: Iterable[int],
    candidates: list[PolicyCandidate],
    *,
    heartbeat: Callable[[], object] = lambda: None,
) -> int:
    """Judge these runs under each candidate, each pinned at the last record its current
    judgement covers, unless that is done already; how many judgements were stored."""
    pks, stored = sorted(set(run_pks)), 0
    for start in range(0, len(pks), RUNS_PER_BLOCK):
        heartbeat()
        block = pks[start : start + RUNS_PER_BLOCK]
        through = dict(
            Run.objects.filter(pk__in=block, current_judgement__isnull=False).values_list(
                "pk", "current_judgement__through_record_id"
            )
        )
        due = {candidate.pk: _not_judged(candidate, through) for candidate in candidates}
        wanted = set().union(*due.values()) if due else set()
        if not wanted:
            continue
        runs = stored_runs(wanted, through={pk: through[pk] for pk in wanted})
        for candidate in candidates:
            stored += _store(candidate, [run for run in runs if run.stored_pk in due[candidate.pk]])
    return stored


def _not_judged(candidate: PolicyCandidate, through: dict[int, int]) -> set[int]:
    """The runs (of `through`: run -> last record to judge) the candidate has not judged up
    to that record."""
    done = set(
        Judgement.objects.filter(purpose=SHADOW, candidate=candidate, run_id__in=list(through))
        .values_list("run_id", "through_record_id")
        .order_by()
    )
    return {pk for pk, last in through.items() if (pk, last) not in done}


def _store(candidate: PolicyCandidate, runs: list[RunToJudge]) -> int:
    if not runs:
        return 0
    judged = judge(runs, candidate_policy(candidate))
    try:
        with transaction.atomic():
            judgements_store(judged, purpose=SHADOW, policy=candidate_ref(candidate))
        return len(judged)
    except IntegrityError:
        # Another worker judged some of them meanwhile: store the rest.
        left = _not_judged(candidate, {r.stored_pk: r.through_record_id for r in runs})
        rest = [item for item in judged if item.run.stored_pk in left]
        with transaction.atomic():
            judgements_store(rest, purpose=SHADOW, policy=candidate_ref(candidate))
        return len(rest)


def candidate_policy(candidate: PolicyCandidate) -> Policy:
    """A candidate's policy, loaded once per process (candidates never change)."""
    return _candidate_policy(candidate.pk, candidate.sha256, candidate)


@lru_cache(maxsize=32)
def _candidate_policy(pk: int, sha256: str, candidate: PolicyCandidate) -> Policy:
    return policy_of_candidate(candidate)


# --- beat: deliveries no worker judged in shadow -----------------------------------------


def shadow_catch_up(*, limit: int = 100) -> int:
    """Send again the deliveries that finished while a candidate was in shadow, longer ago
    than SHADOW_REQUEUE_SECONDS, and are not judged in shadow yet (the message was lost,
    or the worker died); how many were sent."""
    now = timezone.now()
    recent = ShadowDesignation.objects.filter(
        Q(ended_at__isnull=True) | Q(ended_at__gte=now - timedelta(days=1))
    ).values_list("started_at", "ended_at")
    periods = list(recent)
    if not periods:
        return 0
    waiting = (
        IngestBatch.objects.filter(
            state=IngestBatch.State.DONE,
            finished_at__gte=min(start for start, _ in periods),
            finished_at__lte=now - timedelta(seconds=settings.SHADOW_REQUEUE_SECONDS),
        )
        .exclude(pk__in=ShadowBatch.objects.values("batch_id"))
        .order_by("finished_at")
        .values_list("pk", "finished_at")
    )
    sent = 0
    for batch_pk, finished in waiting[: limit * 4]:
        if finished is None:
            continue
        if any(start <= finished and (end is None or finished <= end) for start, end in periods):
            app.send_task(SHADOW_TASK, args=[batch_pk])
            sent += 1
            if sent == limit:
                break
    return sent


def batches_waiting(designation: ShadowDesignation) -> int:
    """Deliveries that finished while the candidate was in shadow and wait for the shadow
    worker (the page shows whether it keeps up)."""
    batches = IngestBatch.objects.filter(
        state=IngestBatch.State.DONE, finished_at__gte=designation.started_at
    ).exclude(pk__in=ShadowBatch.objects.values("batch_id"))
    if designation.ended_at is not None:
        batches = batches.filter(finished_at__lte=designation.ended_at)
    return batches.count()
