"""Reading what a replay found: a job's summary, its groups by category (the drill-down
from each count), one group with both sides' evidence, and the JSON every export and API
answer gives, each labelled "prospective under …" (a replay rewrites no history)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet

from reviewapp.models import (
    FixtureRun,
    Judgement,
    PolicyCandidate,
    ReplayJob,
    ReplayResult,
    TraceRecord,
    Verdict,
    policy_name,
)
from reviewapp.policy.versions import superseded
from reviewapp.replay.compare import COUNTS, FLAGS
from reviewapp.replay.jobs import job_progress

# What a count links to: each flag, and these (unchanged groups are counted, not kept).
CATEGORIES = {
    "changed": "changed in any way",
    "intended": "changed where the change means to act",
    "regressions": "changed elsewhere (regressions)",
    "settled": "open tickets it would settle",
    **FLAGS,
}


def prospective_label(job: ReplayJob) -> str:
    """The job's label in its JSON and the command's output (the API's word)."""
    return f"prospective under {job.candidate.label}"


def as_if_label(job: ReplayJob) -> str:
    """The job's label on its pages, in plain words (the glossary's "what-if")."""
    return f"as if under {job.candidate.label}"


def baseline_label(job: ReplayJob) -> str:
    """What the job compares with, in words: "against v2, the active version", or which is
    active now when that has changed since."""
    baseline = job.baseline
    if baseline is None:
        return "against the verdicts recorded when its runs were frozen"
    if baseline.kind not in (PolicyCandidate.Kind.VERSION, PolicyCandidate.Kind.DEFAULT):
        return f"against {baseline.label}"
    later = superseded(baseline.number, made="against")
    return (
        f"{later}: replay again to compare with it"
        if later
        else f"against {baseline.label}, the active version"
    )


def side_label(job: ReplayJob, judgement: Judgement | None) -> str:
    """The heading of the side a candidate is compared with, on a group's page."""
    if judgement is None:
        return "nothing before" if job.baseline is None else f"{job.baseline.label}: nothing"
    made = "recorded" if judgement.purpose == Judgement.Purpose.ACTIVE else "judged again"
    return f"{made} under {policy_name(judgement.policy_number)}"


def results_in(job: ReplayJob, category: str) -> QuerySet[ReplayResult]:
    """The job's groups in a category, in the order they were compared."""
    results = ReplayResult.objects.filter(job=job)
    if category == "changed":
        results = results.filter(changed=True)
    elif category == "intended":
        results = results.filter(changed=True, intended=True)
    elif category == "regressions":
        results = results.filter(changed=True, intended=False)
    elif category == "settled":
        results = results.filter(settles_ticket=True)
    elif category in FLAGS:
        results = results.filter(**{category: True})
    else:
        results = results.none()
    return results.select_related(
        "run",
        "ticket",
        "recorded_judgement",
        "recorded_verdict",
        "prospective_verdict",
        "recorded_finding",
        "prospective_finding",
    ).order_by("run_id", "key")  # the order of their unique index: no sorting


def flags_of(result: ReplayResult) -> list[str]:
    return [label for name, label in FLAGS.items() if getattr(result, name)]


def observations(result: ReplayResult) -> list[dict[str, Any]]:
    """The observations either side's verdict or finding names, as recorded, up to the
    run's pin in the job's fixture set."""
    ids: dict[str, None] = {}
    for said in (
        result.recorded_verdict,
        result.prospective_verdict,
        result.recorded_finding,
        result.prospective_finding,
    ):
        if said is not None:
            ids.update(dict.fromkeys(str(item) for item in said.evidence))
    pin = (
        FixtureRun.objects.filter(fixture_set_id=result.job.fixture_set_id, run_id=result.run_id)
        .values_list("through_record_id", flat=True)
        .first()
    )
    records = TraceRecord.objects.filter(
        run_id=result.run_id, type=TraceRecord.Type.TOOL_OBSERVATION, key__in=list(ids)
    )
    if pin is not None:
        records = records.filter(id__lte=pin)
    # Where each record's line is, never its bytes: those are read on purpose
    # (views/raw.py), by a person with the raw data permission.
    return [
        {
            "id": record.key,
            "source": record.source,
            "line": record.line_id,
            "where": f"{record.line.batch.file_name}:{record.line.line_number}",
        }
        for record in records.select_related("line__batch").order_by("id")
    ]


def verdict_json(verdict: Verdict | None, number: int | None) -> dict[str, Any] | None:
    if verdict is None:
        return None
    return {
        "kind": verdict.kind,
        "reason": verdict.reason,
        "rule": verdict.rule,
        "value": verdict.value,
        "action": verdict.action,
        "unsafe": verdict.unsafe,
        "evidence": list(verdict.evidence),
        "policyVersion": number,
    }


def result_json(result: ReplayResult, label: str) -> dict[str, Any]:
    recorded: Judgement | None = result.recorded_judgement
    number = recorded.policy_number if recorded is not None else None
    group: dict[str, Any] = (
        {"entity": result.entity, "field": result.field}
        if result.kind == ReplayResult.Kind.VERDICT
        else {"finding": result.finding_kind}
    )
    sides: dict[str, Any]
    if result.kind == ReplayResult.Kind.VERDICT:
        sides = {
            "baseline": verdict_json(result.recorded_verdict, number),
            "prospective": verdict_json(result.prospective_verdict, result.job.candidate.number),
        }
    else:
        sides = {
            "baseline": _finding_json(result.recorded_finding),
            "prospective": _finding_json(result.prospective_finding),
        }
    return {
        "label": label,
        "runId": result.run.run_id,
        **group,
        **sides,
        "changes": [name for name in FLAGS if getattr(result, name)],
        "intended": result.intended,
        "ticket": result.ticket_id,
        "settlesTicket": result.settles_ticket,
    }


def _finding_json(finding: Any) -> dict[str, Any] | None:
    return None if finding is None else {"kind": finding.kind, "evidence": list(finding.evidence)}


def results_lines(job: ReplayJob, category: str) -> Iterator[dict[str, Any]]:
    label = prospective_label(job)
    results = results_in(job, category).select_related("job__candidate")
    for result in results.iterator(chunk_size=2000):
        yield result_json(result, label)


def job_json(job: ReplayJob) -> dict[str, Any]:
    """A job as the API and `manage.py replay --json` give it."""
    progress = job_progress(job)
    return {
        "job": job.pk,
        "label": prospective_label(job),
        "state": job.state,
        "reason": job.reason,
        "startedBy": job.started_by.get_username() if job.started_by else None,
        "createdAt": job.created_at.isoformat(),
        "finishedAt": job.finished_at.isoformat() if job.finished_at else None,
        "candidate": {
            "kind": job.candidate.kind,
            "number": job.candidate.number,
            "label": job.candidate.label,
            "sha256": job.candidate.sha256,
        },
        "baseline": None
        if job.baseline is None
        else {
            "kind": job.baseline.kind,
            "number": job.baseline.number,
            "label": job.baseline.label,
        },
        "against": baseline_label(job),
        "regressions": job.regressions if job.state == ReplayJob.State.DONE else None,
        "fixtureSet": {
            "name": job.fixture_set.name,
            "origin": job.fixture_set.origin,
            "runs": job.fixture_set.run_count,
            "sha256": job.fixture_set.sha256,
        },
        "progress": {
            "items": progress.items,
            "itemsDone": progress.items_done,
            "runs": progress.runs,
            "runsDone": progress.runs_done,
            "percent": progress.percent,
        },
        "counts": {name: progress.counts.get(name, 0) for name in COUNTS},
        "resultSha256": job.result_sha256 or None,
        "error": job.error or None,
    }


def count_rows(counts: dict[str, int]) -> list[tuple[str, str, int]]:
    """(category, what it is called, how many) for every count a job page links from."""
    changed = counts.get("groups", 0) - counts.get("unchanged", 0)
    rows = [
        ("changed", CATEGORIES["changed"], changed),
        ("intended", CATEGORIES["intended"], counts.get("intended", 0)),
        ("regressions", CATEGORIES["regressions"], changed - counts.get("intended", 0)),
        ("unchanged", "unchanged", counts.get("unchanged", 0)),
        ("settled", CATEGORIES["settled"], counts.get("tickets_settled", 0)),
    ]
    return rows + [(name, label, counts.get(name, 0)) for name, label in FLAGS.items()]
