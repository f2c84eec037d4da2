"""The monthly tally: how many discrepancies the runs of each month had, explained or not.

Every discrepancy (reviewapp.reports.entries) has one outcome:
- explained by a RULE: a verdict group resolved by a rule of the policy version in force;
- explained by a REVIEWER: a conflict or finding whose ticket was closed as explained
  (with its cause);
- CLOSED_UNEXPLAINED: its ticket was closed as unexplained;
- OPEN: its ticket is still open (needs a human);
- UNTRACKED: a conflict or finding without a ticket. Every one should have one
  (review.opening opens them as the judgement becomes current); until one is opened it
  counts as unexplained, since nobody has explained it, and is shown apart.
Unexplained is CLOSED_UNEXPLAINED + OPEN + UNTRACKED.

A month with no judged run has no tally (runs is None: no figures, not zeros). The change
from the month before is None when that month had none either. A spike: the unexplained
count is at least SPIKE_FACTOR times the month before's and SPIKE_MIN more.

Counted from the kept entries alone (GROUP BY over an index for the months' counts):
bring them up to date first (entries.tallies_refresh)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, fields, replace
from datetime import date
from typing import Any

from django.db import connection
from django.db.models import Count, Sum

from reviewapp.models import TallyEntry, TallyRun, Ticket
from reviewapp.reports.calendar import month_add, month_key, months_between

OUTCOMES = ("rule", "reviewer", "closed_unexplained", "open", "untracked")
OUTCOME_TITLES = {
    "rule": "resolved by a rule",
    "reviewer": "explained by a reviewer",
    "closed_unexplained": "closed as unexplained",
    "open": "open: needs a human",
    "untracked": "without a ticket",
    "explained": "explained",
    "unexplained": "unexplained",
    "all": "all discrepancies",
}
# What the outcome groups of the page are made of.
OUTCOME_GROUPS = {
    "explained": ("rule", "reviewer"),
    "unexplained": ("closed_unexplained", "open", "untracked"),
    "all": OUTCOMES,
    **{outcome: (outcome,) for outcome in OUTCOMES},
}

SPIKE_FACTOR = 1.5
SPIKE_MIN = 5

# Breakdowns: name -> title. Field and source pair break down verdict groups (findings
# have neither), finding kind breaks down findings; the others every discrepancy.
DIMENSIONS = {
    "field": "Field",
    "sources": "Source pair",
    "cause": "Cause",
    "rule": "Rule",
    "agent": "Agent",
    "finding_kind": "Finding kind",
}

# How the cause breakdown names its values: a reviewer's cause, a rule, or none.
_CAUSE_LABELS = {
    **{value: str(label) for value, label in Ticket.Cause.choices},
    "rule": "a rule of the policy",
    "": "(none: unexplained)",
}


@dataclass(frozen=True)
class Counts:
    rule: int = 0
    reviewer: int = 0
    closed_unexplained: int = 0
    open: int = 0
    untracked: int = 0

    @property
    def explained(self) -> int:
        return self.rule + self.reviewer

    @property
    def unexplained(self) -> int:
        return self.closed_unexplained + self.open + self.untracked

    @property
    def total(self) -> int:
        return self.explained + self.unexplained

    def __add__(self, other: Counts) -> Counts:
        return Counts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def __sub__(self, other: Counts) -> Counts:
        return Counts(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))

    def of(self, group: str) -> int:
        return sum(getattr(self, outcome) for outcome in OUTCOME_GROUPS[group])

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Counts:
        return cls(**{f.name: int(data.get(f.name, 0)) for f in fields(cls)})


def is_spike(now: int, before: int | None) -> bool:
    return before is not None and now - before >= SPIKE_MIN and now >= SPIKE_FACTOR * before


def _unexplained(counts: Counts | None) -> int | None:
    return None if counts is None else counts.unexplained


@dataclass(frozen=True)
class Row:
    """One value of a breakdown in a month, with the month before's counts of it (None
    when that month had no tally)."""

    dimension: str
    key: tuple[str, ...]
    counts: Counts
    previous: Counts | None

    @property
    def label(self) -> str:
        value = self.key[0]
        if self.dimension == "rule":  # a rule, and the policy version it belongs to
            return f"{value} (v{self.key[1]})" if value else "(no rule)"
        if self.dimension == "cause":
            return _CAUSE_LABELS.get(value, value)
        return value or "(none)"

    @property
    def change(self) -> int | None:
        return (
            None if self.previous is None else self.counts.unexplained - self.previous.unexplained
        )

    @property
    def spike(self) -> bool:
        return is_spike(self.counts.unexplained, _unexplained(self.previous))

    def as_dict(self) -> dict[str, Any]:
        return {"key": list(self.key), "label": self.label, "counts": self.counts.as_dict()}


@dataclass(frozen=True)
class MonthTally:
    month: date
    # Judged runs that started in the month; None when none did (no tally: not zeros).
    runs: int | None
    # Their verdict groups, confirmed ones too.
    groups: int
    counts: Counts
    # The month before's counts; None when it had no tally.
    previous: Counts | None = None
    # By DIMENSIONS name, when asked for.
    breakdowns: dict[str, list[Row]] | None = None

    @property
    def key(self) -> str:
        return month_key(self.month)

    @property
    def has_tally(self) -> bool:
        return self.runs is not None

    @property
    def change(self) -> int | None:
        """Unexplained now less unexplained the month before."""
        if not self.has_tally or self.previous is None:
            return None
        return self.counts.unexplained - self.previous.unexplained

    @property
    def spike(self) -> bool:
        return self.has_tally and is_spike(self.counts.unexplained, _unexplained(self.previous))

    def as_dict(self) -> dict[str, Any]:
        """As frozen and exported (breakdowns without the month before's counts)."""
        return {
            "month": self.key,
            "runs": self.runs,
            "groups": self.groups,
            "counts": self.counts.as_dict(),
            "breakdowns": {
                name: [row.as_dict() for row in rows]
                for name, rows in (self.breakdowns or {}).items()
            },
        }


# --- reading --------------------------------------------------------------------------


def _entries() -> str:
    return connection.ops.quote_name(TallyEntry._meta.db_table)


def month_tallies(first: date, last: date) -> list[MonthTally]:
    """The tally of every month from `first` to `last` (with the month before each), from
    two GROUP BY statements whatever the number of runs."""
    before = month_add(first, -1)
    counts: dict[date, dict[str, int]] = defaultdict(dict)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT e.month, e.outcome, COUNT(*) FROM {_entries()} e "
            f"WHERE e.month >= %s AND e.month <= %s GROUP BY 1, 2",
            [before, last],
        )
        for month, outcome, n in cursor.fetchall():
            counts[month][outcome] = n
    runs = {
        month: (n, groups or 0)
        for month, n, groups in TallyRun.objects.filter(month__gte=before, month__lte=last)
        .order_by()
        .values("month")
        .annotate(n=Count("run"), groups=Sum("groups"))
        .values_list("month", "n", "groups")
    }
    tallies = []
    previous: Counts | None = _counts_if(before, runs, counts)
    for month in months_between(first, last):
        current = _counts_if(month, runs, counts)
        n, groups = runs.get(month, (None, 0))
        tallies.append(
            MonthTally(
                month,
                n,
                groups,
                Counts() if current is None else current,
                None if current is None else previous,
            )
        )
        previous = current
    return tallies


def _counts_if(month: date, runs: dict, counts: dict) -> Counts | None:
    return Counts(**counts.get(month, {})) if month in runs else None


Breakdown = dict[str, dict[tuple[str, ...], Counts]]


def breakdown_counts(months: list[date]) -> dict[date, Breakdown]:
    """Every breakdown of each of these months, by DIMENSIONS name and value, from one
    GROUP BY over the combinations of their values (far fewer than the discrepancies)."""
    tallied: dict[date, dict[str, dict[tuple[str, ...], dict[str, int]]]] = {
        month: {name: defaultdict(lambda: defaultdict(int)) for name in DIMENSIONS}
        for month in months
    }
    if not months:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT e.month, e.outcome, e.origin, e.field, e.sources, e.cause, e.rule, "
            f"e.policy_number, e.agent, e.finding_kind, COUNT(*) FROM {_entries()} e "
            f"WHERE e.month IN ({', '.join(['%s'] * len(months))}) "
            f"GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10",
            list(months),
        )
        found = cursor.fetchall()
    for when, outcome, origin, field, sources, cause, rule, number, agent, kind, n in found:
        by = tallied[when]
        keys = {
            "cause": (cause or "",),
            "rule": (rule, str(number)) if rule else ("", ""),
            "agent": (agent,),
        }
        if origin == TallyEntry.Origin.FINDING:
            keys["finding_kind"] = (kind,)
        else:
            keys["field"] = (field,)
            keys["sources"] = (sources or "",)
        for name, key in keys.items():
            by[name][key][outcome] += n
    return {
        month: {
            name: {key: Counts(**counts) for key, counts in by_key.items()}
            for name, by_key in by_name.items()
        }
        for month, by_name in tallied.items()
    }


def breakdown_rows(now: Breakdown, before: Breakdown | None) -> dict[str, list[Row]]:
    """Rows of each breakdown, most unexplained first, beside the month before's counts of
    the same value (None when that month has no tally)."""
    return {
        name: sorted(
            (
                Row(
                    name,
                    key,
                    counts,
                    None if before is None else before.get(name, {}).get(key, Counts()),
                )
                for key, counts in now.get(name, {}).items()
            ),
            key=lambda row: (-row.counts.unexplained, -row.counts.total, row.key),
        )
        for name in DIMENSIONS
    }


def breakdown_of_rows(rows: dict[str, list[Row]]) -> Breakdown:
    return {name: {row.key: row.counts for row in rows.get(name, [])} for name in DIMENSIONS}


def month_tally(month: date) -> MonthTally:
    """One month's tally with its breakdowns (each row beside the month before's)."""
    (tally,) = month_tallies(month, month)
    if not tally.has_tally:
        return replace(tally, breakdowns={})
    before = month_add(month, -1)
    counts = breakdown_counts([month, before])
    return replace(
        tally,
        breakdowns=breakdown_rows(
            counts[month], None if tally.previous is None else counts[before]
        ),
    )


def tally_of_dict(data: dict[str, Any], month: date, previous: Counts | None = None) -> MonthTally:
    """A tally as frozen (MonthTally.as_dict) back."""
    breakdowns = {
        name: [
            Row(
                name,
                tuple(str(part) for part in row["key"]),
                Counts.from_dict(row["counts"]),
                None,
            )
            for row in data.get("breakdowns", {}).get(name, [])
        ]
        for name in DIMENSIONS
    }
    return MonthTally(
        month,
        data.get("runs"),
        int(data.get("groups") or 0),
        Counts.from_dict(data.get("counts", {})),
        previous,
        breakdowns,
    )
