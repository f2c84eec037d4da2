"""Tallies: the monthly explained and unexplained discrepancies (chart, table, breakdowns of
a month, each number drilling down to its tickets in the queue or to the discrepancies
behind it), exports, and closing and reopening months. Reading needs a login; closing and
reopening need CLOSE_MONTH, checked here on the server."""

from __future__ import annotations

from datetime import date

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRefresh

from reviewapp.accounts.roles import CLOSE_MONTH
from reviewapp.durable import worker_silent_since
from reviewapp.forms.fields import whole_number
from reviewapp.forms.reports import MonthClosingForm
from reviewapp.forms.review import form_errors
from reviewapp.infra.csv_export import attachment, csv_response
from reviewapp.reports import exports, items, months
from reviewapp.reports.calendar import (
    current_month,
    days_since_end,
    month_add,
    month_key,
    month_label,
    month_parse,
    tally_zone,
)
from reviewapp.reports.chart import Bar, stacked_bars
from reviewapp.reports.entries import (
    newest_kept_month,
    tallies_refresh,
    tallies_refresh_if_quick,
    tallies_refresh_later,
)
from reviewapp.reports.tally import DIMENSIONS, OUTCOME_TITLES, Counts, Row
from reviewapp.review.stamp import cached, data_stamp
from reviewapp.views.tally_cells import Drill, cells, signed, today

MONTHS_SHOWN = 12
ITEMS_PER_PAGE = 50


def _month_or_404(text: str) -> date:
    month = month_parse(text)
    if month is None:
        raise Http404("no such month")
    return month


def _month_row(view: months.MonthView) -> dict:
    shown = view.shown
    return {
        "view": view,
        "label": month_label(shown.month),
        "key": shown.key,
        "cells": cells(Drill.of(view), shown.counts, drift=_drift(view)) if shown.has_tally else [],
        "runs_today": _runs_today(view),
        "change": _change(shown.change),
    }


def _change(change: int | None) -> str:
    return "—" if change is None else signed(change) or "0"


def _drift(view: months.MonthView) -> Counts | None:
    return None if view.drift is None else view.drift.counts


def _runs_today(view: months.MonthView) -> dict | None:
    """A frozen month's runs today, in words, when they are not as many as when frozen."""
    if view.drift is None or not view.shown.has_tally:
        return None
    return today(view.shown.runs or 0, view.drift.runs)


def _bar(bar: Bar) -> dict:
    """A bar's links: what its halves counted, or today's lists for a frozen month whose
    closing did not keep them (the bar's title says so)."""
    drill, counts = Drill.of(bar.view), bar.view.shown.counts
    return {
        "bar": bar,
        "explained_url": drill.url("explained", counts) or drill.today_url("explained", counts),
        "unexplained_url": drill.url("unexplained", counts)
        or drill.today_url("unexplained", counts),
        "as_frozen": " when frozen" if drill.frozen else "",
        "opens_today": not drill.list_kept,
    }


def _breakdowns(view: months.MonthView) -> list[dict]:
    drill, drift = Drill.of(view), view.drift
    tables = []
    for name, title in DIMENSIONS.items():
        rows: list[Row] = (view.shown.breakdowns or {}).get(name, [])
        changed = drift.rows.get(name, {}) if drift else {}
        tables.append(
            {
                "name": name,
                "title": title,
                "rows": [
                    {
                        "row": row,
                        "cells": cells(
                            drill,
                            row.counts,
                            name,
                            row.key,
                            changed.get(row.key, Counts()) if drift else None,
                        ),
                        "change": _change(row.change),
                    }
                    for row in rows
                ],
                # Values that appeared since the month was frozen: today's alone.
                "new": [
                    {
                        "label": Row(name, key, Counts(), None).label,
                        "today": f"{delta.total} today",
                        "url": drill.today_url("all", delta, name, key),
                    }
                    for key, delta in sorted(changed.items())
                    if key not in {row.key for row in rows}
                ],
            }
        )
    return tables


class _LeftToAWorker(Exception):
    """The tallies are too far behind to bring up to date while somebody waits."""


@require_GET
def tallies(request: HttpRequest) -> HttpResponse:
    zone = tally_zone()
    last = month_parse(request.GET.get("until")) or current_month(zone)
    first = month_add(last, -(MONTHS_SHOWN - 1))
    chosen = month_parse(request.GET.get("month"))
    stamp = data_stamp()

    def views():
        if chosen is not None and not first <= chosen <= last:
            (detail,) = months.month_views(chosen, chosen, breakdowns=True)
            return months.month_views(first, last), detail
        selected = chosen or newest_kept_month(first, last) or last
        overview = months.month_views(first, last, detailed=selected)
        detail = next(view for view in overview if view.shown.month == selected)
        return overview, detail

    def up_to_date_views():
        if tallies_refresh_if_quick() is None:
            raise _LeftToAWorker
        return views()

    key = f"tallies:{stamp.text}:{settings.TALLY_TIME_ZONE}:{first}:{last}:{chosen}"
    catching_up: dict = {}
    try:
        overview, detail = cached(key, up_to_date_views)
    except _LeftToAWorker:
        # After a large ingest: the tallies as last counted (not cached), while a worker
        # counts; the page reloads itself once it has (tallies_status).
        tallies_refresh_later()
        overview, detail = views()
        catching_up = _catching_up()
    selected = detail.shown.month
    can_close = request.user.has_perm(CLOSE_MONTH)
    chart = stacked_bars(overview)
    context = {
        "time_zone": settings.TALLY_TIME_ZONE,
        "close_after_days": settings.TALLY_CLOSE_AFTER_DAYS,
        "chart": chart,
        "bars": [_bar(bar) for bar in chart.bars],
        "months": [_month_row(view) for view in reversed(overview)],
        "detail": detail,
        "detail_label": month_label(selected),
        "detail_key": month_key(selected),
        "detail_cells": cells(Drill.of(detail), detail.shown.counts, drift=_drift(detail))
        if detail.shown.has_tally
        else [],
        "detail_runs_today": _runs_today(detail),
        "detail_change": _change(detail.shown.change),
        "breakdowns": _breakdowns(detail) if detail.shown.has_tally else [],
        "titles": OUTCOME_TITLES,
        "earlier": month_key(month_add(last, -MONTHS_SHOWN)),
        "later": month_key(month_add(last, MONTHS_SHOWN)) if last < current_month(zone) else "",
        "until": month_key(last),
        "first": month_key(first),
        "can_close": can_close and not detail.status.frozen and days_since_end(selected, zone) >= 0,
        "can_reopen": can_close and detail.status.frozen,
        **catching_up,
    }
    return render(request, "reports/tallies.html", context)


@require_GET
def tallies_status(request: HttpRequest) -> HttpResponse:
    """Polled by the tallies page while a worker brings the tallies up to date: the same
    notice while it is too much to do here, then a reload of the page."""
    if tallies_refresh_if_quick() is None:
        return render(request, "reports/tallies.html#catching-up", _catching_up())
    return HttpResponseClientRefresh()


def _catching_up() -> dict:
    """The context of the tallies' catching-up notice (its partial)."""
    return {"catching_up": True, "worker_silent": worker_silent_since()}


@require_GET
def tally_discrepancies(request: HttpRequest, month: str) -> HttpResponse:
    when = _month_or_404(month)
    group = request.GET.get("outcome", "all")
    group = group if group in OUTCOME_TITLES else "all"
    dimension = request.GET.get("by", "")
    dimension = dimension if dimension in DIMENSIONS else ""
    key: tuple[str, ...] = (request.GET.get("value", "")[:200],)
    if dimension == "rule":
        key += (request.GET.get("version", "")[:10],)
    frozen = None
    if "frozen" in request.GET:
        # What a frozen figure counted: a closing of this month that kept it, or nothing.
        frozen = items.frozen_closing(when, whole_number(request.GET["frozen"]))
        if frozen is None:
            raise Http404("no closing of this month kept what it counted")
    else:
        tallies_refresh()
    found = items.discrepancies(when, group, dimension, key, frozen=frozen)
    page = Paginator(found, ITEMS_PER_PAGE).get_page(whole_number(request.GET.get("page")) or 1)
    page.object_list = [
        {**item, "outcome_title": OUTCOME_TITLES[item["outcome"]]} for item in page.object_list
    ]
    context = {
        "month_key": month_key(when),
        "month_label": month_label(when),
        "title": OUTCOME_TITLES[group],
        "dimension": DIMENSIONS.get(dimension, ""),
        "value": Row(dimension, key, Counts(), None).label if dimension else "",
        "page": page,
        "query": _without_page(request),
        "frozen": frozen,
        "today_query": _without(request, "page", "frozen"),
    }
    return render(request, "reports/discrepancies.html", context)


def _without_page(request: HttpRequest) -> str:
    return _without(request, "page")


def _without(request: HttpRequest, *names: str) -> str:
    params = request.GET.copy()
    for name in names:
        params.pop(name, None)
    return params.urlencode()


def _export_range(request: HttpRequest) -> tuple[date, date]:
    named = request.GET.get("from") or request.GET.get("month")
    # No month named: this month's (a bare link to the export is still a download).
    first = month_parse(named) if named else current_month()
    if first is None:
        raise Http404("name a month: ?from=YYYY-MM (and &to=YYYY-MM for a range)")
    last = month_parse(request.GET.get("to")) or first
    if last < first or month_add(first, exports.MAX_MONTHS - 1) < last:
        raise Http404(f"a range is one to {exports.MAX_MONTHS} months, oldest first")
    tallies_refresh()
    return first, last


@require_GET
def tallies_csv(request: HttpRequest) -> StreamingHttpResponse:
    first, last = _export_range(request)
    return csv_response(
        exports.export_name(first, last, "csv"), exports.HEADER, exports.csv_rows(first, last)
    )


@require_GET
def tallies_json(request: HttpRequest) -> StreamingHttpResponse:
    first, last = _export_range(request)
    response = StreamingHttpResponse(
        (chunk.encode("utf-8") for chunk in exports.json_chunks(first, last)),
        content_type="application/json",
    )
    response["Content-Disposition"] = attachment(exports.export_name(first, last, "json"))
    return response


def _back(month: date) -> HttpResponse:
    return redirect(f"{reverse('tallies')}?{urlencode({'month': month_key(month)})}")


def _reason(request: HttpRequest) -> str:
    form = MonthClosingForm(request.POST)
    if not form.is_valid():
        raise months.MonthError(form_errors(form))
    return form.cleaned_data["reason"]


@require_POST
@permission_required(CLOSE_MONTH, raise_exception=True)
def tally_close(request: HttpRequest, month: str) -> HttpResponse:
    when = _month_or_404(month)
    try:
        closing = months.month_close(when, actor=request.user, reason=_reason(request))
    except months.MonthError as error:
        messages.error(request, f"Not closed: {error}.")
    else:
        messages.success(
            request,
            f"{month_label(when)} is closed: its tally is frozen as of "
            f"{closing.created_at:%Y-%m-%d %H:%M}.",
        )
    return _back(when)


@require_POST
@permission_required(CLOSE_MONTH, raise_exception=True)
def tally_reopen(request: HttpRequest, month: str) -> HttpResponse:
    when = _month_or_404(month)
    try:
        months.month_reopen(when, actor=request.user, reason=_reason(request))
    except months.MonthError as error:
        messages.error(request, f"Not reopened: {error}.")
    else:
        messages.success(request, f"{month_label(when)} is open again: its figures are live.")
    return _back(when)
