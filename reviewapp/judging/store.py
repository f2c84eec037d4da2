"""Keeping what the engine said: judgements with their verdicts and findings, for a purpose.

ACTIVE: the active policy judging runs as they are ingested. Only such a judgement may
become its run's current one (the database refuses any other: see the triggers on Run and
Ticket), and only a judgement that became current opens tickets (review.opening).
SHADOW and REPLAY: a candidate policy judging runs beside the active one, or a replay of
them; kept apart, they never move a run's current judgement or a ticket.

A run's current judgement only ever moves forward (to one covering later records, or the
same records under a newer policy), so two ingests judging one run at once cannot leave
the older view current. Storing is idempotent per (run, purpose, policy, last record).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from reviewapp.infra.bulk import insert_rows
from reviewapp.judging.core import Judged
from reviewapp.models import Finding, Judgement, Run, Verdict

ACTIVE = Judgement.Purpose.ACTIVE.value
SHADOW = Judgement.Purpose.SHADOW.value
REPLAY = Judgement.Purpose.REPLAY.value


@dataclass(frozen=True)
class PolicyRef:
    """The policy a judgement was made under: its number (0, the built-in default), for a
    published version its row, and for a SHADOW or REPLAY judgement its candidate."""

    number: int
    version_id: int | None
    candidate_id: int | None = None


@dataclass(slots=True)
class Stored:
    """A judgement as stored, with its verdicts' and findings' ids in the engine's order."""

    judged: Judged
    judgement_id: int
    verdict_ids: list[int] = field(default_factory=list)
    finding_ids: list[int] = field(default_factory=list)
    # Became its run's current judgement (ACTIVE only).
    current: bool = False


def judgements_store(judged: list[Judged], *, purpose: str, policy: PolicyRef) -> list[Stored]:
    """Store these judgements, verdicts and findings; an ACTIVE one becomes its run's
    current judgement unless a newer one is already there."""
    if not judged:
        return []
    judgement_ids = insert_rows(
        Judgement,
        (
            "run_id",
            "purpose",
            "policy_version_id",
            "candidate_id",
            "policy_number",
            "through_record_id",
            "verdict_count",
            "conflict_count",
            "unsafe_count",
            "finding_count",
        ),
        [
            (
                item.run.pk,
                purpose,
                policy.version_id,
                policy.candidate_id,
                policy.number,
                item.run.through_record_id,
                len(item.result.verdicts),
                sum(v.kind == "conflict" for v in item.result.verdicts),
                sum(v.unsafe for v in item.result.verdicts),
                len(item.result.findings),
            )
            for item in judged
        ],
        return_ids=True,
    )
    verdict_rows: list[tuple[Any, ...]] = []
    finding_rows: list[tuple[Any, ...]] = []
    for judgement_id, item in zip(judgement_ids, judged, strict=True):
        verdict_rows.extend(
            (judgement_id, item.run.pk, i, v.entity, v.field, v.action, v.kind, v.reason, v.rule)
            + (v.value, list(v.evidence), v.unsafe)
            for i, v in enumerate(item.result.verdicts)
        )
        finding_rows.extend(
            (judgement_id, item.run.pk, i, f.kind, list(f.evidence), list(f.blocked))
            for i, f in enumerate(item.result.findings)
        )
    verdict_ids = iter(
        insert_rows(
            Verdict,
            ("judgement_id", "run_id", "position", "entity", "field", "action", "kind")
            + ("reason", "rule", "value", "evidence", "unsafe"),
            verdict_rows,
            return_ids=True,
        )
    )
    finding_ids = iter(
        insert_rows(
            Finding,
            ("judgement_id", "run_id", "position", "kind", "evidence", "blocked"),
            finding_rows,
            return_ids=True,
        )
    )
    stored = [
        Stored(
            item,
            judgement_id,
            [next(verdict_ids) for _ in item.result.verdicts],
            [next(finding_ids) for _ in item.result.findings],
        )
        for judgement_id, item in zip(judgement_ids, judged, strict=True)
    ]
    if purpose == ACTIVE:
        now_current = _make_current(judgement_ids)
        for kept in stored:
            kept.current = kept.judgement_id in now_current
    return stored


def covers(current: Judgement | None, *, through_record_id: int, policy_number: int) -> bool:
    """Whether a run's current judgement already judged it up to this record under this
    policy: judging it again would add nothing."""
    return current is not None and (current.policy_number, current.through_record_id) == (
        policy_number,
        through_record_id,
    )


def _make_current(judgement_ids: list[int]) -> set[int]:
    """Point each run at its new judgement unless its current one is newer or the same
    (later records, or the same records under a newer policy); the ids that became current."""
    runs, judged = Run._meta.db_table, Judgement._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {runs} SET current_judgement_id = j.id FROM {judged} j "
            # One array parameter, not one placeholder an id to quote into the text.
            f"WHERE j.id = ANY(%s) AND j.run_id = {runs}.id AND NOT EXISTS ("
            f"SELECT 1 FROM {judged} c WHERE c.id = {runs}.current_judgement_id "
            "AND (c.through_record_id > j.through_record_id OR (c.through_record_id = "
            "j.through_record_id AND c.policy_number >= j.policy_number))) "
            "RETURNING current_judgement_id",
            [list(judgement_ids)],
        )
        return {judgement_id for (judgement_id,) in cursor.fetchall()}
