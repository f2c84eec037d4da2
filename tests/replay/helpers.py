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


def recorded_verdicts(job: ReplayJob) -> dict[tuple[int, str | None, str], tuple]:
    """What was recorded for the job's pinned runs (their recorded judgements' verdicts)."""
    judgements = FixtureRun.objects.filter(fixture_set=job.fixture_set).values_list(
        "recorded_judgement_id", flat=True
    )
    return {
        (v.run_id, v.entity, v.field): (v.kind, v.reason, v.rule, v.value, v.unsafe)
        for v in Verdict.objects.filter(judgement_id__in=list(judgements))
    }


def replayed_verdicts(job: ReplayJob) -> dict[tuple[int, str | None, str], tuple]:
    """What the job stored as prospective, group by group: its candidate's replay
    judgements at the fixture set's pins."""
    pins = dict(
        FixtureRun.objects.filter(fixture_set=job.fixture_set).values_list(
            "run_id", "through_record_id"
        )
    )
    judgements = [
        pk
        for pk, run_pk, through in Judgement.objects.filter(
            purpose="replay", candidate=job.candidate, run_id__in=list(pins)
        ).values_list("pk", "run_id", "through_record_id")
        if pins[run_pk] == through
    ]
    assert len(judgements) == len(pins), "a pinned run without its replay judgement"
    return {
        (v.run_id, v.entity, v.field): (v.kind, v.reason, v.rule, v.value, v.unsafe)
        for v in Verdict.objects.filter(judgement_id__in=judgements)
    }


def changed_groups(job: ReplayJob) -> set[tuple[int, str | None, str]]:
    """The groups whose verdict the engine, judging here, finds changed from the recorded."""
    engine, recorded = engine_verdicts(job), recorded_verdicts(job)
    return {
        group
        for group in engine.keys() | recorded.keys()
        if engine.get(group) != recorded.get(group)
    }


def result_groups(job: ReplayJob) -> list[tuple[int, str | None, str]]:
    """The groups the job kept as changed, once each as written (a list: doubles would show)."""
    return [
        (run_pk, entity, field)
        for run_pk, entity, field in ReplayResult.objects.filter(
            job=job, kind="verdict", changed=True
        ).values_list("run_id", "entity", "field")
    ]


def replay_judgements() -> int:
    return Judgement.objects.filter(purpose="replay").count()
