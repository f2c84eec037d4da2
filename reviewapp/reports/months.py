"""Closed months: a month's tally frozen into an append-only MonthClosing, so that a ticket
closed later, more lines or a newer policy do not silently rewrite what was reported.

A month is closed TALLY_CLOSE_AFTER_DAYS after it ends by the periodic job
(close_due_months), or earlier, once it has ended, by someone who may close months. It can
be reopened with a reason (and closed again later, by hand: the job closes only months
never closed). Each closing and reopening is a MonthClosing row and an AuditEvent; a
closing keeps the discrepancies it counted (FrozenDiscrepancy), what its figures open. What
changed since a month was frozen is its drift: today's figures less the frozen ones."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, datetime

from django.conf import settings
from django.db import transaction

from reviewapp.infra.locks import transaction_lock
from reviewapp.models import AuditEvent, MonthClosing
from reviewapp.reports.calendar import (
    days_since_end,
    month_add,
    month_key,
    months_between,
    tally_zone,
)
from reviewapp.reports.entries import entries_freeze, kept_months, tallies_held, tallies_refresh
from reviewapp.reports.tally import (
    DIMENSIONS,
    Counts,
    MonthTally,
    breakdown_counts,
    breakdown_of_rows,
    breakdown_rows,
    month_tallies,
    month_tally,
    tally_of_dict,
)

CLOSED, REOPENED = MonthClosing.Action.CLOSED, MonthClosing.Action.REOPENED


class MonthError(Exception):
    """A closing or reopening refused; the message says why."""


@dataclass(frozen=True)
class MonthStatus:
    month: date
    # The month's newest closing or reopening, if any.
    last: MonthClosing | None

    @property
    def frozen(self) -> bool:
        return self.last is not None and self.last.action == CLOSED

    @property
    def frozen_at(self) -> datetime | None:
        return self.last.created_at if self.last is not None and self.frozen else None

    def frozen_tally(self) -> MonthTally | None:
        if self.last is None or not self.frozen:
            return None
        return tally_of_dict(self.last.figures, self.month)


def month_statuses(months: list[date]) -> dict[date, MonthStatus]:
    """Whether each month is closed, from one query (rows are few: two a month at most
    in a normal year)."""
    newest: dict[date, MonthClosing] = {}
    for closing in MonthClosing.objects.filter(month__in=months).select_related("actor"):
        newest[closing.month] = closing  # ordered by month, then id
    return {month: MonthStatus(month, newest.get(month)) for month in months}


def month_close(month: date, *, actor=None, reason: str = "") -> MonthClosing:
    """Freeze the month's tally as it is now. By hand (`actor`) or by the periodic job."""
    zone = tally_zone()
    if days_since_end(month, zone) < 0:
        raise MonthError(f"{month_key(month)} has not ended yet")
    # In full: what is frozen must not miss a late commit.
    tallies_refresh(full=True)
    with transaction.atomic():
        _one_at_a_time()
        # The figures and the discrepancies kept with them, read with no refresh between.
        tallies_held()
        frozen_at = month_statuses([month])[month].frozen_at
        if frozen_at is not None:
            raise MonthError(f"{month_key(month)} was closed on {frozen_at:%Y-%m-%d}")
        tally = month_tally(month)
        if not tally.has_tally:
            raise MonthError(f"no judged run started in {month_key(month)}: nothing to freeze")
        closing = MonthClosing.objects.create(
            month=month,
            action=CLOSED,
            figures=tally.as_dict(),
            time_zone=settings.TALLY_TIME_ZONE,
            actor=actor,
            reason=reason.strip(),
            discrepancies_kept=True,
        )
        kept = entries_freeze(closing.pk, month)
        if kept != tally.counts.total:  # cannot be, under tallies_held: refuse all the same
            raise MonthError(f"{month_key(month)} counted {tally.counts.total}, kept {kept}")
        _audit(closing, "month closed", counts=tally.counts.as_dict())
    return closing


def month_reopen(month: date, *, actor, reason: str) -> MonthClosing:
    """Reopen a closed month: its figures are live again until it is closed again."""
    reason = reason.strip()
    if not reason:
        raise MonthError("reopening a month needs a reason")
    with transaction.atomic():
        _one_at_a_time()
        if not month_statuses([month])[month].frozen:
            raise MonthError(f"{month_key(month)} is not closed")
        closing = MonthClosing.objects.create(
            month=month,
            action=REOPENED,
            time_zone=settings.TALLY_TIME_ZONE,
            actor=actor,
            reason=reason,
        )
        _audit(closing, "month reopened")
    return closing


def _audit(closing: MonthClosing, verb: str, **data) -> None:
    AuditEvent.objects.create(
        actor=closing.actor,
        verb=verb,
        target=f"tallies {month_key(closing.month)}",
        data={
            "month": month_key(closing.month),
            "closing": closing.pk,
            "by": "hand" if closing.actor_id else "schedule",
            "reason": closing.reason,
            "time_zone": closing.time_zone,
            **data,
        },
    )


def _one_at_a_time() -> None:
    # A month closed twice at once (the job and an approver) would be frozen twice.
    transaction_lock("crosscheck_tally_months")


def months_due(now: datetime | None = None) -> list[date]:
    """Months with judged runs, ended TALLY_CLOSE_AFTER_DAYS ago or more, never closed."""
    zone = tally_zone()
    ended = [
        month
        for month in kept_months()
        if days_since_end(month, zone, now) >= settings.TALLY_CLOSE_AFTER_DAYS
    ]
    seen = set(
        MonthClosing.objects.filter(month__in=ended).values_list("month", flat=True).distinct()
    )
    return [month for month in ended if month not in seen]


def close_due_months(now: datetime | None = None) -> list[date]:
    """Periodic: bring the tallies up to date in full (whatever the ids seen: see
    entries), then close every month that is due."""
    tallies_refresh(full=True)
    closed = []
    for month in months_due(now):
        try:
            month_close(month)
        except MonthError:
            continue  # closed meanwhile by someone else
        closed.append(month)
    return closed


@dataclass(frozen=True)
class Drift:
    """What changed in a frozen month since: today's figures less the frozen ones."""

    counts: Counts
    runs: int
    # By DIMENSIONS name: the rows whose counts changed, by key.
    rows: dict[str, dict[tuple[str, ...], Counts]]

    @property
    def any(self) -> bool:
        return self.counts != Counts() or self.runs != 0 or any(self.rows.values())


def since_frozen(change: int) -> str:
    """A drift in words, said beside today's figure ("44 today (7 fewer than when frozen)"):
    a signed number beside a frozen one would read as arithmetic."""
    if change == 0:
        return "as many as when frozen"
    return f"{abs(change)} {'more' if change > 0 else 'fewer'} than when frozen"


def drift(frozen: MonthTally, live: MonthTally) -> Drift:
    rows: dict[str, dict[tuple[str, ...], Counts]] = {}
    # Without today's breakdowns (the overview of months), the totals only.
    for name in DIMENSIONS if live.breakdowns is not None else ():
        before = {row.key: row.counts for row in (frozen.breakdowns or {}).get(name, [])}
        now = {row.key: row.counts for row in (live.breakdowns or {}).get(name, [])}
        changed = {}
        for key in before.keys() | now.keys():
            delta = now.get(key, Counts()) - before.get(key, Counts())
            if delta != Counts():
                changed[key] = delta
        rows[name] = changed
    return Drift(live.counts - frozen.counts, (live.runs or 0) - (frozen.runs or 0), rows)


@dataclass(frozen=True)
class MonthView:
    """A month as reported: its frozen figures when it is closed, today's otherwise (shown,
    whose `previous` is what is reported of the month before), and a frozen month's drift."""

    live: MonthTally
    status: MonthStatus
    shown: MonthTally
    drift: Drift | None


def month_views(
    first: date, last: date, *, breakdowns: bool = False, detailed: date | None = None
) -> list[MonthView]:
    """The months from `first` to `last` as reported, with the breakdowns of every month
    (`breakdowns`) or of one (`detailed`, within them); from a fixed number of statements
    (three, four with breakdowns)."""
    months = months_between(month_add(first, -1), last)
    live = {tally.month: tally for tally in month_tallies(months[0], last)}
    statuses = month_statuses(months)
    wanted = months if breakdowns else [month_add(detailed, -1), detailed] if detailed else []
    counts = breakdown_counts([month for month in wanted if month in live])
    views = []
    before: MonthView | None = None
    for month in months:
        tally, status = live[month], statuses[month]
        frozen = status.frozen_tally()
        previous = before.shown if before is not None and before.shown.has_tally else None
        shown = replace(frozen or tally, previous=None if previous is None else previous.counts)
        if month in counts and tally.has_tally:
            tally = replace(tally, breakdowns=breakdown_rows(counts[month], None))
        if month in counts and shown.has_tally:
            now = breakdown_of_rows(frozen.breakdowns or {}) if frozen else counts[month]
            then = None if previous is None else breakdown_of_rows(previous.breakdowns or {})
            shown = replace(shown, breakdowns=breakdown_rows(now, then))
        elif month in counts:
            shown = replace(shown, breakdowns={})
        view = MonthView(tally, status, shown, None if frozen is None else drift(frozen, tally))
        if month >= first:
            views.append(view)
        before = view
    return views
