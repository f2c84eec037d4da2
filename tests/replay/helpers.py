"""What a replay must never change, read byte for byte, and the engine's own verdicts."""

from __future__ import annotations

import hashlib

from django.db import connection

from reviewapp.judging.core import judge, stored_runs
from reviewapp.models import FixtureRun, Judgement, ReplayJob, ReplayResult, Verdict
from reviewapp.policy.candidates import policy_of_candidate

# Each table as PostgreSQL prints its rows (every column), in id order.
RECORDED = {
    "active judgements": "SELECT j::text FROM reviewapp_judgement j WHERE purpose = 'active' ORDER BY id",
    "their verdicts": (
        "SELECT v::text FROM reviewapp_verdict v JOIN reviewapp_judgement j ON j.id = v.judgement_id "
        "WHERE j.purpose = 'active' ORDER BY v.id"
    ),
    "their findings": (
        "SELECT f::text FROM reviewapp_finding f JOIN reviewapp_judgement j ON j.id = f.judgement_id "
        "WHERE j.purpose = 'active' ORDER BY f.id"
    ),
    "runs": "SELECT r::text FROM reviewapp_run r ORDER BY id",
    "tickets": "SELECT t::text FROM reviewapp_ticket t ORDER BY id",
    "audit events": "SELECT a::text FROM reviewapp_auditevent a ORDER BY id",
    "settlement labels": "SELECT s::text FROM reviewapp_prospectivesettlement s ORDER BY id",
}


def recorded_state() -> dict[str, tuple[int, str]]:
    """Row count and SHA-256 of every table a replay must leave as it is."""
    state = {}
    with connection.cursor() as cursor:
        for name, query in RECORDED.items():
            cursor.execute(query)
            rows = [row for (row,) in cursor.fetchall()]
            state[name] = (len(rows), hashlib.sha256("\n".join(rows).encode()).hexdigest())
    return state


def engine_verdicts(job: ReplayJob) -> dict[tuple[int, str | None, str], tuple]:
    """The engine's verdicts on the job's pinned runs, judged here, storing nothing."""
    pins = dict(
        FixtureRun.objects.filter(fixture_set=job.fixture_set).values_list(
            "run_id", "through_record_id"
        )
    )
    policy = policy_of_candidate(job.candidate)
    return {
        (judged.run.stored_pk, v.entity, v.field): (v.kind, v.reason, v.rule, v.value, v.unsafe)
        for judged in judge(stored_runs(pins, through=pins), policy)
        for v in judged.result.verdicts
    }


def replayed_verdicts(job: ReplayJob) -> dict[tuple[int, str | None, str], tuple]:
    """What the job stored as prospective, group by group."""
    ids = ReplayResult.objects.filter(job=job, kind="verdict").values_list(
        "prospective_verdict_id", flat=True
    )
    return {
        (v.run_id, v.entity, v.field): (v.kind, v.reason, v.rule, v.value, v.unsafe)
        for v in Verdict.objects.filter(pk__in=[i for i in ids if i is not None])
    }


def replay_judgements() -> int:
    return Judgement.objects.filter(purpose="replay").count()
