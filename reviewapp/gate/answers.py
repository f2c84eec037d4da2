"""What the gate answered: the live source beside ingested traces on the shadow page,
counted per day, action and reason by decision (allow, block, would-block, rejected), in
one SQL statement over the recorded answers."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date

from django.db import connection

from reviewapp.infra.days import Window
from reviewapp.infra.storable_text import NUL
from reviewapp.models import GateAnswer

DECISIONS = tuple(d.value for d in GateAnswer.Decision)
ANSWERS = GateAnswer._meta.db_table


@dataclass
class Decisions:
    """Answers by decision."""

    counts: dict[str, int] = field(default_factory=dict)

    # No __getitem__: templates would read every attribute through it.
    def of(self, decision: str) -> int:
        return self.counts.get(decision, 0)

    # For templates, which cannot read "would-block".
    @property
    def allow(self) -> int:
        return self.of("allow")

    @property
    def block(self) -> int:
        return self.of("block")

    @property
    def would_block(self) -> int:
        return self.of("would-block")

    @property
    def rejected(self) -> int:
        return self.of("rejected")

    @property
    def stopped(self) -> int:
        """Blocked, or would have been (the actions a policy stops or would stop)."""
        return self.of("block") + self.of("would-block")

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def as_dict(self) -> dict[str, int]:
        return {decision: self.of(decision) for decision in DECISIONS}


@dataclass
class AnswerCounts:
    window: Window
    total: Decisions = field(default_factory=Decisions)
    by_day: list[tuple[date, Decisions]] = field(default_factory=list)
    by_action: list[tuple[str, Decisions]] = field(default_factory=list)
    by_reason: list[tuple[str, int]] = field(default_factory=list)

    def rows(self) -> list[tuple[str, str, dict[str, int]]]:
        """(grouping, value, counts by decision) for exports."""
        rows = [("all", "", self.total.as_dict())]
        rows += [("day", day.isoformat(), counts.as_dict()) for day, counts in self.by_day]
        rows += [("action", action, counts.as_dict()) for action, counts in self.by_action]
        rows += [("reason", reason, {"would-block or block": n}) for reason, n in self.by_reason]
        return rows


def answer_counts(window: Window) -> AnswerCounts:
    """Every count of the window's answers."""
    inside = "a.created_at >= %s AND a.created_at < %s"
    params = [window.start, window.end]
    day = "CAST((a.created_at AT TIME ZONE 'UTC')::date AS TEXT)"
    statement = " UNION ALL ".join(
        [
            f"SELECT 'all' AS grouping, '' AS value, a.decision, count(*) FROM {ANSWERS} a "
            f"WHERE {inside} GROUP BY a.decision",
            f"SELECT 'day', {day}, a.decision, count(*) FROM {ANSWERS} a WHERE {inside} "
            f"GROUP BY {day}, a.decision",
            f"SELECT 'action', a.action, a.decision, count(*) FROM {ANSWERS} a WHERE {inside} "
            "GROUP BY a.action, a.decision",
            f"SELECT 'reason', r.value, '', count(*) FROM {ANSWERS} a "
            f"CROSS JOIN jsonb_array_elements_text(a.reasons) AS r WHERE {inside} "
            "AND a.decision IN ('block', 'would-block') GROUP BY r.value",
        ]
    )
    found: dict[str, dict[str, Decisions]] = defaultdict(lambda: defaultdict(Decisions))
    reasons: dict[str, int] = {}
    with connection.cursor() as cursor:
        cursor.execute(statement, params * 4)
        for grouping, value, decision, count in cursor.fetchall():
            if grouping == "reason":
                reasons[value] = int(count)
            else:
                found[grouping][value or ""].counts[decision] = int(count)
    by_day = {date.fromisoformat(day): counts for day, counts in found["day"].items()}
    return AnswerCounts(
        window=window,
        total=found["all"].get("", Decisions()),
        by_day=[(day, by_day.get(day, Decisions())) for day in window.days],
        by_action=sorted(
            found["action"].items(), key=lambda pair: (-pair[1].stopped, -pair[1].total, pair[0])
        ),
        by_reason=sorted(reasons.items(), key=lambda pair: (-pair[1], pair[0])),
    )


def recent_answers(
    *,
    decision: str | None = None,
    action: str | None = None,
    day: date | None = None,
    limit: int = 25,
) -> list[GateAnswer]:
    """The latest answers, newest first, of a decision, action or day. An action holding a
    NUL names none (PostgreSQL refuses it in a query): it is ignored, as the queue's
    filters are."""
    answers = GateAnswer.objects.select_related("token__user").order_by("-id")
    if day is not None:
        one = Window(day, day)
        answers = answers.filter(created_at__gte=one.start, created_at__lt=one.end)
    if decision in DECISIONS:
        answers = answers.filter(decision=decision)
    if action is not None and NUL not in action:
        answers = answers.filter(action=action)
    return list(answers[:limit])
