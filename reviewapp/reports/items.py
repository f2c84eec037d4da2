"""The discrepancies behind one number of a month's tally, one by one: what a figure of
the tallies page drills down to when the queue cannot show it (verdict groups resolved by
a rule have no ticket; the queue has no rule or exact source-pair filter)."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.db.models import Q, QuerySet

from reviewapp.models import TallyEntry
from reviewapp.reports.tally import DIMENSIONS, OUTCOME_GROUPS

FINDING = TallyEntry.Origin.FINDING

COLUMNS = (
    *("run__run_id", "origin", "field", "entity", "sources", "rule", "policy_number"),
    *("agent", "finding_kind", "ticket_id", "outcome", "cause"),
)


def discrepancies(
    month: date, group: str, dimension: str = "", key: tuple[str, ...] = ()
) -> QuerySet[TallyEntry, dict[str, Any]]:
    """The month's discrepancies with an outcome of `group` (see tally.OUTCOME_GROUPS)
    and, given a breakdown, its value `key`, as COLUMNS values; in run order."""
    selected = Q(outcome__in=OUTCOME_GROUPS.get(group, OUTCOME_GROUPS["all"]))
    if dimension in DIMENSIONS and key:
        selected &= _of_value(dimension, key)
    return (
        TallyEntry.objects.filter(month=month)
        .filter(selected)
        .order_by("run_id", "id")
        .values(*COLUMNS)
    )


def _of_value(dimension: str, key: tuple[str, ...]) -> Q:
    value = key[0]
    if dimension in ("field", "sources"):
        return ~Q(origin=FINDING) & Q(**{dimension: value})
    if dimension == "finding_kind":
        return Q(origin=FINDING, finding_kind=value)
    if dimension == "rule":
        if not value:
            return Q(rule="")
        version = key[1] if len(key) > 1 else ""
        if not version.isdecimal():
            return Q(pk__in=[])
        return Q(rule=value, policy_number=int(version))
    return Q(**{dimension: value})  # cause, agent
