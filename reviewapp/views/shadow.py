"""Shadow mode in the browser: what the active policy blocked, what a candidate in shadow
would change, what the live gate answered; every count drills down to its runs; exports;
and the approver's actions (put a candidate in shadow, take it out, backfill a window).
Views compose reports (blocked counts), shadow (designations and comparisons) and gate
(answers), which never import each other. The gate's own page is views/gate.py."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.paginator import Paginator
from django.db.models import F
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from reviewapp.accounts.roles import APPROVE_RULE
from reviewapp.forms.fields import whole_number, window_asked
from reviewapp.forms.review import form_errors
from reviewapp.forms.shadow import BackfillForm, ShadowEndForm, ShadowStartForm
from reviewapp.gate.answers import answer_counts
from reviewapp.infra.csv_export import attachment, csv_response
from reviewapp.infra.days import Window
from reviewapp.judging.blocking import DIMENSIONS, ItemFilter
from reviewapp.models import PolicyVersion, ShadowBackfill, ShadowDesignation, policy_name
from reviewapp.policy.versions import counted_under
from reviewapp.reports.blocked import blocked_counts, blocked_runs, tickets_attach
from reviewapp.shadow.backfill import backfill_start
from reviewapp.shadow.compare import STATUSES, comparison, comparison_runs
from reviewapp.shadow.designations import (
    ShadowError,
    candidate_choices,
    candidate_choose,
    shadow_end,
    shadow_start,
)
from reviewapp.shadow.judging import batches_waiting
from reviewapp.views.charts import day_chart

DIMENSION_LABELS = {
    "action": "Action",
    "field": "Field",
    "sources": "Source pair",
    "agent": "Agent",
    "reason": "Reason",
}
# What a blank value of a dimension means, in words (a finding blocks with no sources).
BLANK_LABELS = {
    "action": "no action",
    "field": "no field (a finding)",
    "sources": "no sources (a finding)",
    "agent": "no agent named",
    "reason": "no reason given",
}
STATUS_LABELS = {"new": "would newly block", "unblocked": "would unblock", "unchanged": "unchanged"}
ROWS_SHOWN = 12
RUNS_PER_PAGE = 25


FILTERS = {f.name for f in fields(ItemFilter)}


def _runs_url(window: Window, **query: Any) -> str:
    filters = ItemFilter(**{k: v for k, v in query.items() if k in FILTERS})
    rest = {k: v for k, v in query.items() if k not in FILTERS}
    parts = [window.query(), urlencode(rest), filters.query()]
    return reverse("shadow-runs") + "?" + "&".join(part for part in parts if part)


def _active_number() -> int:
    return PolicyVersion.objects.order_by("-number").values_list("number", flat=True).first() or 0


def _selected(request: HttpRequest, designations: list[ShadowDesignation]):
    wanted = whole_number(request.GET.get("designation"))
    for designation in designations:
        if designation.pk == wanted:
            return designation
    return next((d for d in designations if d.is_open), None)


@require_GET
def shadow_page(request: HttpRequest) -> HttpResponse:
    window, window_error = window_asked(request.GET)
    designations = list(
        ShadowDesignation.objects.select_related(
            "candidate", "candidate__proposal", "started_by", "ended_by"
        ).order_by(F("ended_at").desc(nulls_first=True), "-started_at")[:20]
    )
    selected = _selected(request, designations)
    can_approve = request.user.has_perm(APPROVE_RULE)
    if request.GET.get("part") == "comparison" and selected is not None:
        # The comparison alone, as the page polls it while the shadow worker judges.
        part = {"selected": selected, "can_approve": can_approve, "query": window.query()}
        return render(
            request, "shadow/_comparison.html", {**part, **_comparison_context(selected, window)}
        )
    blocked = blocked_counts(window)
    gate = answer_counts(window)
    context: dict[str, Any] = {
        "window": window,
        "window_error": window_error,
        "active_number": _active_number(),
        "blocked": blocked,
        "counted_under": counted_under(blocked.versions),
        "blocked_chart": day_chart(
            "Blocked actions per day under the active policy",
            [(day, [n]) for day, n in blocked.by_day],
            [("bar-blocked", "blocked")],
            lambda day, _: _runs_url(window, scope="active", day=day),
        ),
        "weeks": [
            (week, n, _runs_url(window, scope="active", week=week)) for week, n in blocked.by_week
        ],
        "dimensions": [
            (
                name,
                DIMENSION_LABELS[name],
                [
                    (value, n, _runs_url(window, scope="active", **{name: value}))
                    for value, n in blocked.by[name][:ROWS_SHOWN]
                ],
                len(blocked.by[name]),
                BLANK_LABELS[name],
            )
            for name in DIMENSIONS
        ],
        "designations": designations,
        "selected": selected,
        "gate": gate,
        "gate_chart": day_chart(
            "Live checks per day",
            [(day, [c.block, c.would_block, c.allow]) for day, c in gate.by_day],
            [("bar-blocked", "blocked"), ("bar-new", "would be blocked"), ("bar-allow", "allowed")],
            lambda day, _: reverse("gate") + f"?day={day.isoformat()}",
        ),
        "can_approve": can_approve,
        "query": window.query(),
        "export_query": window.query() + (f"&designation={selected.pk}" if selected else ""),
    }
    if selected is not None:
        context.update(_comparison_context(selected, window))
    if context["can_approve"]:
        context["choices"] = candidate_choices()
        context["start_form"] = ShadowStartForm()
    return render(request, "shadow/page.html", context)


def _comparison_context(designation: ShadowDesignation, window: Window) -> dict[str, Any]:
    compared = comparison(designation, window)
    shadow = {"scope": "shadow", "designation": designation.pk}
    return {
        "compared": compared,
        "compared_chart": day_chart(
            f"What {designation.candidate.label} would change, per day",
            [(day, [c.new, c.unblocked]) for day, c in compared.by_day],
            [("bar-new", "would newly block"), ("bar-unblocked", "would unblock")],
            lambda day, j: _runs_url(window, **shadow, status=STATUSES[j], day=day),
        ),
        "compared_links": {
            status: _runs_url(window, **shadow, status=status) for status in STATUSES
        },
        "compared_actions": [
            (
                action,
                counts,
                {
                    status: _runs_url(window, **shadow, status=status, action=action)
                    for status in STATUSES
                },
            )
            for action, counts in compared.by_action
        ],
        "waiting": batches_waiting(designation) if designation.is_open else 0,
        **_backfills(designation),
    }


@require_GET
def shadow_runs(request: HttpRequest) -> HttpResponse:
    """The runs behind a count: under the active policy, or of a candidate's comparison."""
    window, window_error = window_asked(request.GET)
    item_filter = ItemFilter.read(request.GET)
    designation = None
    status = request.GET.get("status")
    if request.GET.get("scope") == "shadow":
        designation = get_object_or_404(
            ShadowDesignation.objects.select_related("candidate"),
            pk=whole_number(request.GET.get("designation")) or 0,
        )
        found = comparison_runs(designation, window, item_filter, status=status)
    else:
        found = blocked_runs(window, item_filter)
    page = Paginator(found, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    tickets_attach(page)
    query = request.GET.copy()
    query.pop("page", None)
    query.pop("run", None)
    context = {
        "window": window,
        "window_error": window_error,
        "designation": designation,
        "status": STATUS_LABELS.get(status or "", ""),
        "described": item_filter.described(),
        "found": found,
        "page": page,
        "query": query.urlencode(),
        "back": reverse("shadow")
        + f"?{window.query()}"
        + (f"&designation={designation.pk}" if designation else ""),
    }
    return render(request, "shadow/runs.html", context)


@require_POST
@permission_required(APPROVE_RULE, raise_exception=True)
def shadow_start_view(request: HttpRequest) -> HttpResponse:
    form = ShadowStartForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not put in shadow: " + form_errors(form))
        return redirect("shadow")
    try:
        candidate = candidate_choose(form.cleaned_data["candidate"], user=request.user)
        designation = shadow_start(candidate, user=request.user, reason=form.cleaned_data["reason"])
    except (ShadowError, ValueError) as exc:
        messages.error(request, f"Not put in shadow: {exc}.")
        return redirect("shadow")
    messages.success(
        request,
        f"{candidate.label} is in shadow: every run ingested from now on is also judged under it.",
    )
    if form.window:
        since, until = form.window
        backfill_start(designation, since=since, until=until, user=request.user)
        messages.info(request, f"Backfilling {since} to {until} (a what-if), by a worker.")
    return redirect(reverse("shadow") + f"?designation={designation.pk}")


@require_POST
@permission_required(APPROVE_RULE, raise_exception=True)
def shadow_end_view(request: HttpRequest, pk: int) -> HttpResponse:
    designation = get_object_or_404(ShadowDesignation.objects.select_related("candidate"), pk=pk)
    form = ShadowEndForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    try:
        shadow_end(designation, user=request.user, reason=reason)
    except ShadowError as exc:
        messages.error(request, f"{exc}.")
    else:
        messages.success(request, f"{designation.candidate.label} is out of shadow.")
    return redirect(reverse("shadow") + f"?designation={pk}")


@require_POST
@permission_required(APPROVE_RULE, raise_exception=True)
def shadow_backfill_view(request: HttpRequest, pk: int) -> HttpResponse:
    designation = get_object_or_404(ShadowDesignation.objects.select_related("candidate"), pk=pk)
    form = BackfillForm(request.POST)
    if not form.is_valid() or form.window is None:
        messages.error(request, "Not backfilled: " + form_errors(form))
    else:
        since, until = form.window
        try:
            backfill_start(designation, since=since, until=until, user=request.user)
        except ShadowError as exc:
            messages.error(request, f"Not backfilled: {exc}.")
        else:
            messages.success(request, f"Backfilling {since} to {until} (a what-if).")
    return redirect(reverse("shadow") + f"?designation={pk}")


@require_GET
def backfill_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The backfills of a designation, as the page polls them while one runs."""
    designation = get_object_or_404(ShadowDesignation, pk=pk)
    context = {"selected": designation, **_backfills(designation)}
    return render(request, "shadow/_backfills.html", context)


def _backfills(designation: ShadowDesignation) -> dict[str, Any]:
    backfills = list(ShadowBackfill.objects.filter(designation=designation).order_by("-id")[:5])
    return {"backfills": backfills, "backfilling": any(not b.is_finished for b in backfills)}


# --- exports ------------------------------------------------------------------------------


EXPORT_HEADER = ["source", "policy", "since", "until", "grouping", "value", "measure", "count"]


def _export(request: HttpRequest) -> tuple[Window, list[list[Any]], dict[str, Any]]:
    window, _ = window_asked(request.GET)
    number = _active_number()
    active_label = f"{policy_name(number)} (active)"
    blocked = blocked_counts(window)
    span = [window.since.isoformat(), window.until.isoformat()]
    rows: list[list[Any]] = [
        ["ingested traces", active_label, *span, grouping, value, "blocked", count]
        for grouping, value, count in blocked.rows()
    ]
    document: dict[str, Any] = {
        "window": {"since": span[0], "until": span[1]},
        "active": {
            "policy": active_label,
            # Each run is counted as its current judgement says, made under these versions.
            "countedUnder": [
                {"policy": policy_name(n), "runs": runs} for n, runs in blocked.versions
            ],
            "blocked": _as_json(blocked.rows()),
        },
    }
    wanted = whole_number(request.GET.get("designation"))
    designation = (
        ShadowDesignation.objects.select_related("candidate").filter(pk=wanted).first()
        if wanted
        else ShadowDesignation.objects.select_related("candidate")
        .filter(ended_at__isnull=True)
        .order_by("started_at")
        .first()
    )
    if designation is not None:
        label = f"{designation.candidate.label} (in shadow, prospective)"
        compared = comparison(designation, window)
        for grouping, value, *counts in compared.rows():
            for status, count in zip(STATUSES, counts, strict=True):
                rows.append(
                    ["ingested traces", label, *span, grouping, value, STATUS_LABELS[status], count]
                )
        document["shadow"] = {
            "policy": label,
            "runsCompared": compared.runs_compared,
            "runsPending": compared.runs_pending,
            "counts": [
                {"grouping": g, "value": v, **dict(zip(STATUSES, counts, strict=True))}
                for g, v, *counts in compared.rows()
            ],
        }
    gate = answer_counts(window)
    gate_rows = gate.rows()
    for grouping, value, decisions in gate_rows:
        for decision, count in decisions.items():
            rows.append(
                ["live checks", "active when asked", *span, grouping, value, decision, count]
            )
    document["gate"] = [{"grouping": g, "value": v, **d} for g, v, d in gate_rows]
    return window, rows, document


def _as_json(rows: list[tuple[str, str, int]]) -> list[dict[str, Any]]:
    return [{"grouping": g, "value": v, "count": n} for g, v, n in rows]


@require_GET
def shadow_export_csv(request: HttpRequest) -> StreamingHttpResponse:
    window, rows, _ = _export(request)
    return csv_response(f"blocked-{window.since}-{window.until}.csv", EXPORT_HEADER, rows)


@require_GET
def shadow_export_json(request: HttpRequest) -> HttpResponse:
    window, _, document = _export(request)
    response = HttpResponse(
        json.dumps(document, indent=2, ensure_ascii=False), content_type="application/json"
    )
    response["Content-Disposition"] = attachment(f"blocked-{window.since}-{window.until}.json")
    return response
