"""Processing one claimed item of a replay job, in one transaction: its pinned runs are
judged under the job's candidate and under its baseline, the version the candidate builds
on (a replay judgement stored before for the same run, candidate and record is reused,
never judged again; the recorded judgement stands for the baseline where it was made under
that version), compared, and the results written together with the item's new state. A worker that dies half-way
leaves nothing: its transaction is rolled back and the item is claimed again.

Replay writes only REPLAY judgements (with their verdicts and findings) and its own rows:
never a recorded verdict, a run's current judgement or a ticket (the database refuses a
replay judgement as either)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import msgspec
from django.db import connection, transaction
from django.utils import timezone

from reviewapp.engine import Policy
from reviewapp.infra.bulk import insert_rows
from reviewapp.judging.core import judge, stored_runs
from reviewapp.judging.store import REPLAY, judgements_store
from reviewapp.models import (
    Finding,
    FixtureRun,
    Judgement,
    PolicyCandidate,
    ReplayItem,
    ReplayJob,
    ReplayResult,
    Run,
    Ticket,
    Verdict,
)
from reviewapp.policy.candidates import candidate_ref, policy_of_candidate
from reviewapp.policy.documents import ChangeScope, change_scope
from reviewapp.replay.compare import (
    RESULT_COLUMNS,
    Compared,
    Found,
    RunPair,
    Said,
    Side,
    compare_runs,
)

_decode = msgspec.json.Decoder().decode


@lru_cache(maxsize=32)
def _policy(candidate_id: int) -> Policy:
    # Candidates never change (the database refuses it): each is read once per process.
    return policy_of_candidate(PolicyCandidate.objects.get(pk=candidate_id))


@lru_cache(maxsize=32)
def _scope(candidate_id: int, baseline_id: int) -> ChangeScope:
    documents = dict(
        PolicyCandidate.objects.filter(pk__in=(candidate_id, baseline_id)).values_list(
            "pk", "document"
        )
    )
    return change_scope(documents[baseline_id], documents[candidate_id])


def item_process(item_id: int, token: str) -> bool:
    """Process an item this worker claimed (`token`); False when it is no longer ours (its
    lease ran out and someone else took it) or its job was cancelled meanwhile."""
    with transaction.atomic():
        # Its own row only (of="self"): a lock on the job would make workers wait in turn.
        item = (
            ReplayItem.objects.select_for_update(of=("self",))
            .filter(pk=item_id, state=ReplayItem.State.RUNNING, claimed_by=token)
            .order_by("pk")
            .first()
        )
        if item is None:
            return False
        job = ReplayJob.objects.select_related("candidate", "baseline").get(pk=item.job_id)
        if job.state == ReplayJob.State.CANCELLED:
            item.state, item.lease_until = ReplayItem.State.CANCELLED, None
            item.save(update_fields=["state", "lease_until"])
            return False
        compared = compare_item(job, item)
        insert_rows(ReplayResult, RESULT_COLUMNS, compared.rows)
        item.state = ReplayItem.State.DONE
        item.counts = compared.counts
        item.digest = compared.hexdigest
        item.finished_at = timezone.now()
        item.lease_until = None
        item.error = ""
        item.save(
            update_fields=["state", "counts", "digest", "finished_at", "lease_until", "error"]
        )
    return True


def compare_item(job: ReplayJob, item: ReplayItem) -> Compared:
    pinned = list(
        FixtureRun.objects.filter(
            fixture_set_id=job.fixture_set_id,
            id__gte=item.first_fixture_run_id,
            id__lte=item.last_fixture_run_id,
        )
        .order_by("id")
        .values_list("run_id", "through_record_id", "recorded_judgement_id", "run__run_id")
    )
    pins = {run_pk: through for run_pk, through, _, _ in pinned}
    # Runs whose raw data expired are not judged: what is left of them is not the run.
    expired = set(
        Run.objects.filter(pk__in=list(pins), raw_expired_at__isnull=False).values_list(
            "pk", flat=True
        )
    )
    judged = {pk: through for pk, through in pins.items() if pk not in expired}
    prospective = prospective_sides(job.candidate, judged)
    baseline = baseline_sides(job, pinned, judged)
    tickets = tickets_of(list(pins))
    pairs = (
        RunPair(
            run_pk,
            run_id,
            baseline.get(run_pk) or Side(),
            prospective.get(run_pk),
            tickets[run_pk],
            expired=run_pk in expired,
        )
        for run_pk, _, _, run_id in pinned
    )
    scope = _scope(job.candidate_id, job.baseline_id) if job.baseline_id else None
    return compare_runs(job.pk, pairs, scope)


def baseline_sides(
    job: ReplayJob, pinned: Sequence[tuple[int, int, int | None, str]], judged: dict[int, int]
) -> dict[int, Side]:
    """What the job's baseline says of each pinned run, by run pk: the recorded judgement
    where it was made under the baseline version (or the job has no baseline: a job from
    before them), else the runs judged under the baseline as under any candidate."""
    recorded_ids = {run_pk: judgement for run_pk, _, judgement, _ in pinned if judgement}
    baseline = job.baseline
    if baseline is not None and baseline.kind in (
        PolicyCandidate.Kind.VERSION,
        PolicyCandidate.Kind.DEFAULT,
    ):
        under_it = set(
            Judgement.objects.filter(
                pk__in=list(recorded_ids.values()), policy_number=baseline.number
            ).values_list("pk", flat=True)
        )
        recorded_ids = {pk: j for pk, j in recorded_ids.items() if j in under_it}
    elif baseline is not None:
        recorded_ids = {}
    recorded = sides_of(recorded_ids.values())
    sides = {run_pk: recorded[judgement] for run_pk, judgement in recorded_ids.items()}
    if baseline is not None:
        rest = {pk: through for pk, through in judged.items() if pk not in sides}
        if rest:
            sides.update(prospective_sides(baseline, rest))
    return sides


def tickets_of(
    run_pks: list[int],
) -> dict[int, dict[tuple[str, str | None, str], tuple[int, str, str]]]:
    """The runs' tickets by group: ("conflict", entity, field) or ("finding", None, kind)."""
    found: dict[int, dict[tuple[str, str | None, str], tuple[int, str, str]]] = defaultdict(dict)
    among, params = _in("run_id", run_pks)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT run_id, kind, entity, field, finding_kind, id, state "
            f"FROM {Ticket._meta.db_table} WHERE {among}",
            params,
        )
        for run_pk, kind, entity, name, finding_kind, ticket_id, state in cursor:
            group = (
                (kind, None, finding_kind) if kind == Ticket.Kind.FINDING else (kind, entity, name)
            )
            found[run_pk][group] = (ticket_id, kind, state)
    return found


def _in(column: str, values: list[Any]) -> tuple[str, list[Any]]:
    """`column` among `values`: one array parameter (a statement with 500 placeholders
    costs more to send than to run)."""
    return f"{column} = ANY(%s)", [list(values)]


def prospective_sides(candidate: PolicyCandidate, pins: dict[int, int]) -> dict[int, Side]:
    """What the candidate says of each pinned run, by run pk: a replay judgement kept for
    the same run, candidate and last record is read back; the other runs are judged now
    (judging.core) and their judgements stored (judging.store, purpose REPLAY)."""
    kept = _kept_judgements(candidate, pins)
    runs = stored_runs([pk for pk in pins if pk not in kept], through=pins)
    # A pinned record that no longer parses leaves the run judged up to an earlier one.
    moved = {
        run.stored_pk: run.through_record_id
        for run in runs
        if run.through_record_id != pins[run.stored_pk]
    }
    if moved:
        kept.update(_kept_judgements(candidate, moved))
        runs = [run for run in runs if run.stored_pk not in kept]
    run_of = {judgement_id: run_pk for run_pk, judgement_id in kept.items()}
    sides = {run_of[judgement_id]: side for judgement_id, side in sides_of(kept.values()).items()}
    stored = judgements_store(
        judge(runs, _policy(candidate.pk)), purpose=REPLAY, policy=candidate_ref(candidate)
    )
    for item in stored:
        side = Side(item.judgement_id)
        for verdict_id, verdict in zip(item.verdict_ids, item.judged.result.verdicts, strict=True):
            side.verdicts[(verdict.entity, verdict.field)] = Said(
                verdict_id,
                verdict.kind,
                verdict.reason,
                verdict.rule,
                verdict.value,
                verdict.unsafe,
                verdict.action,
            )
        for finding_id, finding in zip(item.finding_ids, item.judged.result.findings, strict=True):
            side.findings[finding.kind] = Found(finding_id, tuple(finding.evidence))
        sides[item.judged.run.stored_pk] = side
    return sides


def _kept_judgements(candidate: PolicyCandidate, pins: dict[int, int]) -> dict[int, int]:
    """Replay judgements stored before under this candidate at exactly these pins."""
    among, params = _in("run_id", list(pins))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT run_id, through_record_id, id FROM {Judgement._meta.db_table} "
            f"WHERE {among} AND purpose = %s AND candidate_id = %s",
            [*params, REPLAY, candidate.pk],
        )
        rows = cursor.fetchall()
    return {
        run_pk: judgement_id for run_pk, through, judgement_id in rows if pins[run_pk] == through
    }


def sides_of(judgement_ids: Iterable[int]) -> dict[int, Side]:
    """Stored judgements' verdicts and findings, by judgement id. Read as text and decoded
    here (msgspec): the ORM's JSON decoding costs more than the rest of the read."""
    ids = sorted(set(judgement_ids))
    sides = {judgement_id: Side(judgement_id) for judgement_id in ids}
    if not ids:
        return sides
    verdicts, findings = Verdict._meta.db_table, Finding._meta.db_table
    among, params = _in("judgement_id", ids)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT judgement_id, id, entity, field, kind, reason, rule, value, unsafe, action "
            f"FROM {verdicts} WHERE {among}",
            params,
        )
        for row in cursor:
            judgement_id, verdict_id, entity, name, kind, reason, rule, value, unsafe, action = row
            sides[judgement_id].verdicts[(entity, name)] = Said(
                verdict_id, kind, reason, rule, _json(value), bool(unsafe), action
            )
        cursor.execute(
            f"SELECT judgement_id, id, kind, evidence FROM {findings} WHERE {among}", params
        )
        for judgement_id, finding_id, kind, evidence in cursor:
            sides[judgement_id].findings[kind] = Found(finding_id, tuple(_json(evidence)))
    return sides


def _json(text: Any) -> Any:
    # A JSON column as the driver gives it: text (the ORM's way).
    if text is None or not isinstance(text, str | bytes):
        return text
    return _decode(text)
