"""The discrepancies behind one number of a month's tally, one by one: what a figure of
the tallies page drills down to when the queue cannot show it (verdict groups resolved by
a rule have no ticket; the queue has no rule or exact source-pair filter), and what a
frozen figure counted (kept with its closing: the queue shows only today's tickets)."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.db.models import Q, QuerySet

from reviewapp.models import FrozenDiscrepancy, MonthClosing, TallyEntry
from reviewapp.reports.tally import DIMENSIONS, OUTCOME_GROUPS

FINDING = TallyEntry.Origin.FINDING

COLUMNS = (
    *("run__run_id", "origin", "field", "entity", "sources", "rule", "policy_number"),
    *("agent", "finding_kind", "ticket_id", "outcome", "cause"),
)


def discrepancies(
    month: date,
    group: str,
    dimension: str = "",
    key: tuple[str, ...] = (),
    *,
    frozen: MonthClosing | None = None,
) -> QuerySet[Any, dict[str, Any]]:
    """The month's discrepancies with an outcome of `group` (see tally.OUTCOME_GROUPS)
    and, given a breakdown, its value `key`, as COLUMNS values; in run order. Today's, or
    with `frozen` (a closing of the month that kept them) those it counted, as then."""
    selected = Q(outcome__in=OUTCOME_GROUPS.get(group, OUTCOME_GROUPS["all"]))
    if dimension in DIMENSIONS and key:
        selected &= _of_value(dimension, key)
    found: QuerySet[Any] = (
        TallyEntry.objects.filter(month=month)
        if frozen is None
        else FrozenDiscrepancy.objects.filter(closing=frozen)
    )
    return found.filter(selected).order_by("run_id", "id").values(*COLUMNS)


def frozen_closing(month: date, closing_id: int | None) -> MonthClosing | None:
    """The closing of the month with this id, if it kept what it counted."""
    if closing_id is None or closing_id >= 2**63:  # no bigint: no closing
        return None
    return MonthClosing.objects.filter(
        pk=closing_id,
        month=month,
        action=MonthClosing.Action.CLOSED,
        discrepancies_kept=True,
    ).first()


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
