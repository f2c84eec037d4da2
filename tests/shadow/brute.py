"""Counting the slow, obvious way: every stored verdict and finding read into Python, one
judgement at a time, and blocked actions found by reading the spec's definition again.
Every count the pages and exports show is checked against these."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from reviewapp.models import Finding, Judgement, Run, TraceRecord, Verdict

# Written out again, not imported: the definition under test lives in judging.blocking.
TRAJECTORY = {
    "tool-outside-allowlist",
    "out-of-scope-entity",
    "missing-prerequisite",
    "mutation-budget-exceeded",
    "retry-without-idempotency-key",
    "retry-after-unknown-outcome",
}


@dataclass(frozen=True)
class Item:
    run: int
    key: tuple
    action: str
    field: str
    sources: str
    agent: str
    reason: str
    day: date

    @property
    def week(self) -> date:
        return self.day - timedelta(days=self.day.weekday())


def in_window(run: Run, since: date, until: date) -> bool:
    day = run.started_at.astimezone(UTC).date()
    return since <= day <= until


def items_of(judgement: Judgement, run: Run) -> list[Item]:
    """Blocked items of one judgement, from its rows."""
    records = list(TraceRecord.objects.filter(run=run).select_related("line").order_by("id"))
    sources = {r.key: r.source for r in records if r.type == "tool_observation"}
    tools: dict[str, str] = {}
    for r in records:
        if r.type == "tool_call":
            tools.setdefault(r.key, r.document.get("tool", ""))
    day = run.started_at.astimezone(UTC).date()
    found = []
    for v in Verdict.objects.filter(judgement=judgement):
        if not v.unsafe:
            continue
        pair = ",".join(sorted({sources[i] for i in v.evidence if i in sources}))
        key = ("verdict", v.entity, v.field, v.action or "", "", "")
        found.append(
            Item(run.pk, key, v.action or "", v.field, pair, run.agent, v.reason or "", day)
        )
    for f in Finding.objects.filter(judgement=judgement):
        if f.kind not in TRAJECTORY:
            continue
        # The calls it blocked (a retry's first attempt is evidence, not blocked); every
        # call of its evidence for a finding stored before they were kept.
        for call in f.evidence if f.blocked is None else f.blocked:
            tool = tools.get(call, "")
            key = ("finding", None, "", tool, f.kind, call)
            found.append(Item(run.pk, key, tool, "", "", run.agent, f.kind, day))
    return found


def active_items(since: date, until: date) -> list[Item]:
    found = []
    for run in Run.objects.select_related("current_judgement"):
        if run.current_judgement is not None and in_window(run, since, until):
            found.extend(items_of(run.current_judgement, run))
    return found


def counts(items: list[Item]) -> dict[str, Counter]:
    by: dict[str, Counter] = defaultdict(Counter)
    for item in items:
        by["day"][item.day] += 1
        by["week"][item.week] += 1
        for name in ("action", "field", "sources", "agent", "reason"):
            by[name][getattr(item, name)] += 1
    return by


def shadow_pairs(
    candidate_id: int, since: date, until: date
) -> list[tuple[Run, Judgement, Judgement]]:
    """(run, its current judgement, its shadow judgement under the candidate covering the
    same records) for runs of the window."""
    pairs = []
    for run in Run.objects.select_related("current_judgement"):
        current = run.current_judgement
        if current is None or not in_window(run, since, until):
            continue
        shadow = Judgement.objects.filter(
            run=run,
            purpose="shadow",
            candidate_id=candidate_id,
            through_record_id=current.through_record_id,
        ).first()
        if shadow is not None:
            pairs.append((run, current, shadow))
    return pairs


def comparison(candidate_id: int, since: date, until: date) -> dict[str, list[Item]]:
    """Items newly blocked, unblocked and unchanged under the candidate."""
    found: dict[str, list[Item]] = {"new": [], "unblocked": [], "unchanged": []}
    for run, current, shadow in shadow_pairs(candidate_id, since, until):
        active = {item.key: item for item in items_of(current, run)}
        candidate = {item.key: item for item in items_of(shadow, run)}
        found["new"] += [item for key, item in candidate.items() if key not in active]
        found["unblocked"] += [item for key, item in active.items() if key not in candidate]
        found["unchanged"] += [item for key, item in candidate.items() if key in active]
    return found


def today() -> date:
    return datetime.now(UTC).date()
