"""The review desk: the ticket queue, the ticket page, work on tickets and the handoff
package. Reading needs a login; every change needs WORK_TICKET, checked here on the server."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.functional import SimpleLazyObject, cached_property
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from reviewapp.accounts.roles import WORK_TICKET
from reviewapp.forms import review as review_forms
from reviewapp.models import AuditEvent, Run, Ticket, TicketComment
from reviewapp.privacy.access import RawAccessRefused
from reviewapp.reports.calendar import month_key, month_label, month_of, tally_zone
from reviewapp.review import changes, counts, errors, marks, queue, raw, related, runs, stamp
from reviewapp.review import filters as defined
from reviewapp.review.disputed import disputed_sides
from reviewapp.review.evidence import ticket_evidence, with_judgement
from reviewapp.review.filters import ASSIGNEE_ME, ASSIGNEE_NONE
from reviewapp.review.raw import IDENTITIES_RAW, IDENTITIES_TOKENS
from reviewapp.views import review_bulk, review_rows
from reviewapp.views.htmx import HtmxHttpRequest
from reviewapp.views.review_urls import queue_url as _queue_url
from reviewapp.views.review_urls import url_with as _url_with

TICKETS_PER_PAGE = 50
FAMILIES_SHOWN = 100
RELATED_SHOWN = 10
EVIDENCE_CACHE_SECONDS = 600


# --- the queue --------------------------------------------------------------------


@require_GET
def ticket_queue(request: HtmxHttpRequest) -> HttpResponse:
    filters = queue.queue_filters(request.GET)
    facets = counts.facet_counts(filters, request.user)
    tickets = queue.queue_tickets(filters, request.user).values(*review_rows.queue_row_columns())
    page = _CountedQueue(tickets, facets.total).get_page(request.GET.get("page"))
    can_work = request.user.has_perm(WORK_TICKET)
    # The template caches what it renders from these under facets.version, so they are
    # lazy: read and formatted only when that cache has nothing yet.
    facet_links = SimpleLazyObject(lambda: _facet_links(filters, facets))
    context = {
        "filters": filters,
        "facets": facets,
        "facet_links": facet_links,
        # Read only when the filter form is shown (a lazy list, like the rows).
        "filter_inputs": lambda: _filter_inputs(filters),
        "row_cells": defined.cells(),
        "quick_views": _quick_views(filters),
        "filter_chips": _filter_chips(filters),
        "undo": review_bulk.undo_offer(request) if can_work else None,
        # A search for a run id leads to the run's page too (read only when searching).
        "run_found": lambda: (
            Run.objects.filter(run_id=filters.q).values_list("pk", "run_id").first()
        ),
        "sorts": queue.SORT_LABELS,
        "query": urlencode(filters.as_params()),
        # The filter form is kept per filters and this (a version is one of its choices).
        "newest_policy_number": stamp.DataStamp.from_text(facets.seen).newest_policy_number,
        "page": page,
        "families": SimpleLazyObject(lambda: _family_rows(filters, request.user, facets.version)),
        "families_shown": FAMILIES_SHOWN,
        "rows": lambda: review_rows.rows_rendered(
            page.object_list, can_work=can_work, queue_query=urlencode(filters.as_params())
        ),
        "can_work": can_work,
        "workers": related.ticket_workers() if can_work else [],
        "causes": changes.REVIEWER_CAUSES,
        "cache_seconds": stamp.CACHE_SECONDS,
        # The data as the page shows it, for a bulk change of a whole family or of every
        # ticket matching the filters (changes.revisions_as_seen).
        "seen": facets.seen,
    }
    template = "review/queue.html"
    if request.htmx:
        # A filter form change swaps the results only; a link swaps the form too.
        template += "#queue-results" if request.htmx.target == "queue-results" else "#queue"
    return render(request, template, context)


def _family_rows(filters: queue.QueueFilters, user, version: str) -> list:
    return [
        (family, _queue_url(filters, family=family.fingerprint, group=""))
        for family in queue.families(filters, user, limit=FAMILIES_SHOWN, version=version)
    ]


class _CountedQueue(Paginator):
    """Pages of the queue, whose number of tickets is the counts' (cached) total: paging
    asks the database nothing, and a page's tickets are read only when its rows are."""

    def __init__(self, tickets: QuerySet, total: int):
        super().__init__(tickets, TICKETS_PER_PAGE)
        self.total = total

    @cached_property
    def count(self) -> int:
        return self.total


def _filter_inputs(filters: queue.QueueFilters) -> list[dict]:
    """Every filter's control on the filter form (its definition's Input), the search box
    first; a counted filter typed in suggests its counted values (the datalists)."""
    inputs = []
    for item in sorted(defined.FILTERS, key=lambda item: item.input.type != "search"):
        shown, current = item.input, getattr(filters, item.name)
        choices = shown.choices() if callable(shown.choices) else shown.choices
        inputs.append(
            {
                "name": item.name,
                "type": shown.type,
                "label": shown.label or item.label,
                "title": shown.title,
                "size": shown.size if shown.type in ("text", "search") else None,
                "placeholder": shown.placeholder,
                "current": current.isoformat() if isinstance(current, date) else current or "",
                "suggest": item.counted and shown.type == "text",
                "choices": [
                    # "any" says itself where it is not the default (the state's).
                    (value or ("any" if item.default else ""), label, value == (current or ""))
                    for value, label in choices
                ],
            }
        )
    return inputs


def _facet_links(filters: queue.QueueFilters, facets: counts.Facets) -> list[dict]:
    """Each dimension's values with their counts, as links that set (or clear) the filter."""
    base, params = reverse("ticket-queue"), filters.as_params()
    groups = []
    for item in defined.counted():
        name, title = item.name, item.label
        current = getattr(filters, name)
        values = []
        for value, count in facets.values(name):
            chosen = current == value
            # Choosing a chosen value again clears it; where "" is not the default (the
            # state), clearing means "any".
            target = value if not chosen else "any" if item.default else ""
            values.append(
                {
                    # A blank value in words: "no source", "no assignee"...
                    "value": value or f"no {title.lower()}",
                    "count": str(count),  # as text: the template need not format it
                    "chosen": chosen,
                    "url": _url_with(base, params, {name: target}),
                    # A blank value is no filter.
                    "blank": not value,
                }
            )
        groups.append(
            {
                "name": name,
                "title": title,
                "values": values,
                "current": current,
                "suggestions": item.suggestions,
            }
        )
    return groups


def _filter_chips(filters: queue.QueueFilters) -> list[dict]:
    """The active filters, each with the queue's URL without it (the chip that removes it).
    The sort and the grouping are how the queue is shown, not what it selects."""
    labels = {item.name: item.label for item in defined.FILTERS}
    return [
        {
            "label": labels.get(name, name),
            "value": value,
            "url": _queue_url(filters, **{name: ""}),
        }
        for name, value in filters.as_params().items()
        if name not in ("sort", "group", "page")
    ]


def _quick_views(filters: queue.QueueFilters) -> list[dict]:
    views = [
        ("All open", queue.QueueFilters()),
        ("Assigned to me", queue.QueueFilters(assignee=ASSIGNEE_ME)),
        ("Unassigned", queue.QueueFilters(assignee=ASSIGNEE_NONE)),
        ("Unsafe", queue.QueueFilters(unsafe="yes")),
        ("Families", queue.QueueFilters(group="family")),
    ]
    return [
        {"label": label, "url": _queue_url(view), "current": view == filters}
        for label, view in views
    ]


# --- the ticket -------------------------------------------------------------------


def _ticket_or_404(ticket_id: int) -> Ticket:
    """The ticket with what the page shows of it (its evidence is read apart, when needed)."""
    return get_object_or_404(
        Ticket.objects.select_related("run", "batch", "assignee", "closed_by"), pk=ticket_id
    )


def _work_context(request: HttpRequest, ticket: Ticket, seen: stamp.DataStamp) -> dict:
    """What the work panel shows: who holds the ticket, the forms, the trail, comments.

    The trail and the comments are cached by the template under the data stamp (every
    change and comment renames it), so they are read only when that cache has nothing."""
    can_work = request.user.has_perm(WORK_TICKET)

    events = SimpleLazyObject(
        lambda: list(
            AuditEvent.objects.filter(ticket=ticket).select_related("actor").order_by("id")
        )
    )

    def comments() -> list:
        # Every comment is in the trail too: a ticket nobody commented on needs no query.
        if not any(event.verb == "commented" for event in events):
            return []
        return list(TicketComment.objects.filter(ticket=ticket).select_related("author"))

    return {
        "ticket": ticket,
        "stamp": seen.text,
        "cache_seconds": stamp.CACHE_SECONDS,
        "can_work": can_work,
        "workers": related.ticket_workers() if can_work else [],
        "causes": changes.REVIEWER_CAUSES,
        # Which observation was right, marked with an explained close; the close's mark.
        "mark_choices": SimpleLazyObject(lambda: marks.mark_choices(ticket) if can_work else []),
        "mark_none": marks.NONE_RIGHT,
        "mark": SimpleLazyObject(lambda: marks.current_mark(ticket)),
        "trail": SimpleLazyObject(lambda: [(e, changes.describe(e)) for e in events]),
        "comments": SimpleLazyObject(comments),
    }


# --- moving through the queue the reviewer came from --------------------------------


def _came_from(params) -> tuple[str, queue.QueueFilters]:
    """The queue a ticket was opened from (its filters, URL-encoded in `queue`)."""
    query = params.get("queue", "")[:2000]
    return query, queue.queue_filters(QueryDict(query))


def ticket_in_queue_url(ticket_id: int, queue_query: str) -> str:
    """A ticket's page, opened from the queue whose filters `queue_query` holds ("" for the
    queue's home: `queue` is in the URL whenever the ticket was opened from a queue)."""
    base = reverse("ticket-detail", args=[ticket_id])
    return base + f"?{urlencode({'queue': queue_query})}"


def _queue_moves(request: HttpRequest, ticket: Ticket) -> dict:
    """The links to the ticket before and after this one in the queue it came from, and
    back to that queue. A ticket opened from elsewhere (a link, a run) has no neighbours:
    that query is spared."""
    query, filters = _came_from(request.GET)
    if "queue" not in request.GET:
        return {"from_queue": False, "queue_query": "", "queue_url": _queue_url(filters)}
    previous, following = queue.neighbours(filters, request.user, ticket)
    return {
        "from_queue": True,
        "queue_query": query,
        "queue_url": _queue_url(filters),
        "previous_url": ticket_in_queue_url(previous, query) if previous else "",
        "next_url": ticket_in_queue_url(following, query) if following else "",
    }


@require_GET
def ticket_detail(request: HttpRequest, ticket_id: int) -> HttpResponse:
    ticket = _ticket_or_404(ticket_id)
    seen = stamp.data_stamp()
    context = {
        **_work_context(request, ticket, seen),
        **_queue_moves(request, ticket),
        # What was judged never changes: the template caches its part of the page for good,
        # and calls this (once, through {% with %}) only when that cache has nothing yet.
        "read_evidence": lambda: ticket_evidence(with_judgement(ticket)),
        "evidence_seconds": EVIDENCE_CACHE_SECONDS,
        # Read when the template's cache (under the data stamp) has nothing.
        "related": SimpleLazyObject(lambda: _related(ticket)),
        "family_url": _queue_url(queue.QueueFilters(family=ticket.fingerprint, state="")),
        "related_shown": RELATED_SHOWN,
        "later": related.later_judgement(ticket),
        "disputed": disputed_sides(ticket.disputed),
        # Newer versions that would settle this ticket: labels, never changes to it. Only a
        # version newer than the ticket's can have any.
        "settlements": ticket.settlements.select_related("policy_version").order_by(
            "policy_version__number"
        )
        if seen.newest_policy_number > ticket.policy_number
        else (),
    }
    return render(request, "review/detail.html", context)


def _related(ticket: Ticket) -> related.RelatedTickets:
    """The tickets beside this one, each with its URL and its run's in the queue, made here
    from one reverse each: a reverse per row was half the time of rendering them."""
    found = related.related_tickets(ticket, shown=RELATED_SHOWN)
    ticket_url = review_rows.url_of_each_ticket("ticket-detail")
    queue_url = reverse("ticket-queue")
    for other in (*found.family, *found.same_run):
        other["url"] = ticket_url(other["pk"])
        other["run_url"] = _url_with(queue_url, {"state": "any"}, {"q": other["run__run_id"]})
    return found


@require_GET
def run_detail(request: HttpRequest, run_pk: int) -> HttpResponse:
    """A run whole, as a timeline: its records, verdicts, findings and tickets."""
    run = get_object_or_404(Run.objects.select_related("current_judgement"), pk=run_pk)
    month = month_of(run.started_at, tally_zone())
    return render(
        request,
        "review/run.html",
        {
            "timeline": runs.run_timeline(run),
            "tally_month": {"key": month_key(month), "label": month_label(month)},
        },
    )


@require_GET
def ticket_handoff(request: HttpRequest, ticket_id: int) -> HttpResponse:
    """The handoff package, identities as tokens; `?identities=raw&reason=...` for the
    values themselves (the raw data permission; recorded)."""
    ticket = get_object_or_404(Ticket.objects.select_related("run"), pk=ticket_id)
    identities = request.GET.get("identities", IDENTITIES_TOKENS)
    if identities not in (IDENTITIES_TOKENS, IDENTITIES_RAW):
        return HttpResponse("identities is tokens or raw.", status=400, content_type="text/plain")
    try:
        package = raw.ticket_handoff(
            request.user, ticket, identities=identities, reason=request.GET.get("reason")
        )
    except RawAccessRefused as refused:
        status = 403 if refused.forbidden else 400
        return HttpResponse(f"Not exported: {refused}.", status=status, content_type="text/plain")
    response = HttpResponse(
        json.dumps(package, indent=2, ensure_ascii=False), content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="ticket-{ticket_id}-handoff.json"'
    return response


def _advance(request: HtmxHttpRequest, ticket_id: int) -> HttpResponse | None:
    """With auto-advance on (the ticket page's toggle, posted as `advance`): the next ticket
    of the queue the reviewer came from, or None when there is none."""
    if request.POST.get("advance") != "1":
        return None
    query, filters = _came_from(request.POST)
    ticket = get_object_or_404(Ticket, pk=ticket_id)
    _, following = queue.neighbours(filters, request.user, ticket)
    if following is None:
        messages.info(request, "That was the last ticket of this queue.")
        return None
    url = ticket_in_queue_url(following, query)
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _after_change(request: HtmxHttpRequest, ticket_id: int, *, advance: bool) -> HttpResponse:
    """htmx: the work panel again, with the message; a plain POST: back to the ticket.
    With auto-advance: the next ticket of the queue instead."""
    advanced = _advance(request, ticket_id) if advance else None
    if advanced is not None:
        return advanced
    if request.htmx:
        ticket = _ticket_or_404(ticket_id)
        context = _work_context(request, ticket, stamp.data_stamp())
        return render(request, "review/ticket/_work.html", context)
    # The queue's keyboard claim comes back to the queue it was made from.
    back = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        # As a URL, never a view name: redirect("foo") would look "foo" up and fail.
        return HttpResponseRedirect(back)
    return redirect("ticket-detail", ticket_id=ticket_id)


def _work(
    request: HtmxHttpRequest,
    ticket_id: int,
    form_class: type[forms.Form],
    change: Callable[[Ticket, dict[str, Any]], object],
    done: str,
    *,
    advance: bool = False,
) -> HttpResponse:
    """Apply one change, posted through its form, and say how it went. Only a change that
    finishes the ticket (`advance`: a close) may move on to the next one: after a claim, an
    assignment or a comment the reviewer still has this ticket to work."""
    ticket = get_object_or_404(Ticket, pk=ticket_id)
    form = form_class(request.POST)
    try:
        if not form.is_valid():
            raise errors.TicketActionError(review_forms.form_errors(form))
        change(ticket, form.cleaned_data)
    except changes.StaleChangeError as stale:
        messages.error(request, str(stale))
    except errors.TicketActionError as error:
        messages.error(request, f"Not applied: {error}.")
    else:
        messages.success(request, done)
        return _after_change(request, ticket_id, advance=advance)
    # Refused: stay on this ticket, whatever auto-advance says, to read why.
    return _after_change(request, ticket_id, advance=False)


@require_POST
@permission_required(WORK_TICKET, raise_exception=True)
def ticket_claim(request: HtmxHttpRequest, ticket_id: int) -> HttpResponse:
    return _work(
        request,
        ticket_id,
        review_forms.TicketChange,
        lambda t, data: changes.ticket_claim(t, revision=data["revision"], actor=request.user),
        "You hold this ticket now.",
    )


@require_POST
@permission_required(WORK_TICKET, raise_exception=True)
def ticket_assign(request: HtmxHttpRequest, ticket_id: int) -> HttpResponse:
    return _work(
        request,
        ticket_id,
        review_forms.AssignForm,
        lambda t, data: changes.ticket_assign(
            t, revision=data["revision"], actor=request.user, assignee=data["assignee"]
        ),
        "Assignment changed.",
    )


@require_POST
@permission_required(WORK_TICKET, raise_exception=True)
def ticket_close(request: HtmxHttpRequest, ticket_id: int) -> HttpResponse:
    return _work(
        request,
        ticket_id,
        review_forms.CloseForm,
        lambda t, data: changes.ticket_close(
            t,
            revision=data["revision"],
            actor=request.user,
            resolution=data["resolution"],
            cause=data["cause"],
            cause_text=data["cause_text"],
            right=data["right"],
        ),
        "Ticket closed.",
        advance=True,
    )


@require_POST
@permission_required(WORK_TICKET, raise_exception=True)
def ticket_reopen(request: HtmxHttpRequest, ticket_id: int) -> HttpResponse:
    return _work(
        request,
        ticket_id,
        review_forms.TicketChange,
        lambda t, data: changes.ticket_reopen(t, revision=data["revision"], actor=request.user),
        "Ticket reopened.",
    )


@require_POST
@permission_required(WORK_TICKET, raise_exception=True)
def ticket_comment(request: HtmxHttpRequest, ticket_id: int) -> HttpResponse:
    return _work(
        request,
        ticket_id,
        review_forms.CommentForm,
        lambda t, data: changes.ticket_comment(t, actor=request.user, text=data["text"]),
        "Comment added.",
    )
