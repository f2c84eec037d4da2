"""Bulk work from the queue: assign or close the checked tickets, a whole family, or every
ticket the queue's filters match as the page showed them; a close, and any change of all
matching, first shown and confirmed; a close undone for a while by its author."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, cast

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from reviewapp.accounts.roles import WORK_TICKET
from reviewapp.forms import review as review_forms
from reviewapp.models import Ticket
from reviewapp.review import changes, errors, queue, stamp
from reviewapp.views.review_urls import queue_url


@require_POST
@permission_required(WORK_TICKET, raise_exception=True)
def ticket_bulk(request: HttpRequest) -> HttpResponse:
    """Assign or close the checked tickets, every open ticket of one family, or every ticket
    the queue's filters select as the page showed them."""
    filters = posted_filters(request.POST)
    form = review_forms.BulkForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Not applied: {review_forms.form_errors(form)}.")
        return redirect(queue_url(filters))
    data = form.cleaned_data
    try:
        if data["whole_family"]:
            seen = stamp.DataStamp.from_text(data["seen"])
            expected = changes.family_revisions(data["whole_family"], seen)
        elif data["all_matching"]:
            # The filters evaluated again here, on the tickets as the page showed them.
            seen = stamp.DataStamp.from_text(data["seen"])
            expected = changes.revisions_as_seen(
                queue.filtered_tickets(filters, request.user), seen
            )
        else:
            expected = form.selection(request.POST.getlist("selected"))
        if not expected:
            messages.warning(request, "Nothing was selected.")
            return redirect(queue_url(filters))
        asks = data["operation"] == "close" or data["all_matching"]
        if asks and request.POST.get("confirmed") != "1":
            # Say what the change would take, held tickets first, and ask.
            if data["operation"] == "close":
                changes.check_closing(data["resolution"], data["cause"], data["cause_text"])
            return bulk_confirmation(
                request,
                expected,
                action=reverse("ticket-bulk"),
                back=queue_url(filters),
                change=_change_restated(data),
                shown=data["all_matching"],
            )
        if data["operation"] == "close":
            bulk = uuid.uuid4().hex
            outcome = changes.tickets_close(
                expected,
                actor=request.user,
                resolution=data["resolution"],
                cause=data["cause"],
                cause_text=data["cause_text"],
                bulk=bulk,
            )
            verb = "closed"
            if outcome.changed:
                request.session[UNDO_SESSION_KEY] = {"bulk": bulk, "count": len(outcome.changed)}
        else:
            outcome = changes.tickets_assign(
                expected, actor=request.user, assignee=data["assignee"]
            )
            verb = "assigned"
    except errors.TicketActionError as error:
        messages.error(request, f"Not applied: {error}.")
        return redirect(queue_url(filters))
    messages.success(request, outcome.summary(verb))
    for stale in outcome.stale[:5]:
        messages.warning(request, str(stale))
    return redirect(queue_url(filters))


UNDO_SESSION_KEY = "crosscheck.bulk_undo"

# The queue's filters ride along a bulk post under this prefix: the bulk form has fields of
# the same names (the assignee to assign to is not the assignee filter).
FILTER_PREFIX = "filter-"


def posted_filters(posted: QueryDict) -> queue.QueueFilters:
    """The queue's filters a bulk post carries: prefixed (FILTER_PREFIX), as the queue's
    form posts them, or else by their own names."""
    prefixed: dict[str, str] = {
        name.removeprefix(FILTER_PREFIX): posted.get(name, "")
        for name in posted
        if name.startswith(FILTER_PREFIX)
    }
    return queue.queue_filters(prefixed if prefixed else cast(Mapping[str, str], posted))


def _change_restated(data: dict[str, Any]) -> dict[str, str]:
    """The change a bulk post asks for, in words, for its confirmation."""
    if data["operation"] == "assign":
        return {"verb": "Assign", "to": data["assignee"] or "nobody (unassign)"}
    causes = dict(changes.REVIEWER_CAUSES)
    return {
        "verb": "Close",
        "resolution": data["resolution"],
        "cause": causes.get(data["cause"], ""),
        "note": data["cause_text"],
    }


# The tickets a confirmation lists; it counts every one.
CONFIRMATION_LISTS = 200


def bulk_confirmation(
    request: HttpRequest,
    expected: dict[int, int],
    *,
    action: str,
    back: str,
    change: dict[str, str] | None = None,
    shown: int | None = None,
) -> HttpResponse:
    """The tickets a bulk change would change, as they are now, and the same post again (to
    `action`) with `confirmed`: held tickets (someone else's above all) are named. `change`
    restates it (a close by default); `shown`, the number of tickets the page said the
    filters matched, is set against the number that match now."""
    me = request.user.get_username()
    selected = Ticket.objects.filter(pk__in=list(expected))
    tickets: list[dict[str, Any]] = [
        {
            **row,
            "held_by_other": bool(row["assignee__username"]) and row["assignee__username"] != me,
        }
        for row in selected.order_by("pk").values(
            "pk", "state", "reason", "field", "finding_kind", "entity", "assignee__username"
        )[:CONFIRMATION_LISTS]
    ]
    held_by_others = list(
        selected.filter(assignee__isnull=False)
        .exclude(assignee__username=me)
        .order_by("pk")
        .values("pk", "assignee__username")[:CONFIRMATION_LISTS]
    )
    posted = [
        (name, value)
        for name, values in request.POST.lists()
        if name not in ("csrfmiddlewaretoken", "confirmed")
        for value in values
    ]
    context = {
        "count": len(expected),
        "tickets": tickets,
        "more": max(0, len(expected) - len(tickets)),
        "held_by_others": held_by_others,
        "change": change or {"verb": "Close"},
        "shown": shown,
        "posted": posted,
        "action": action,
        "back": back,
        "undo_minutes": changes.UNDO_SECONDS // 60,
    }
    return render(request, "review/bulk_confirm.html", context)


def undo_offer(request: HttpRequest) -> dict | None:
    """The bulk close this person may still undo, for the queue to offer."""
    offer = request.session.get(UNDO_SESSION_KEY)
    if not offer:
        return None
    if not changes.bulk_closed(offer["bulk"], request.user):
        del request.session[UNDO_SESSION_KEY]
        return None
    return offer


@require_POST
@permission_required(WORK_TICKET, raise_exception=True)
def ticket_bulk_undo(request: HttpRequest) -> HttpResponse:
    """Reopen exactly what this person's last bulk close closed, audited as a new change."""
    bulk = request.POST.get("bulk", "")[:64]
    try:
        outcome = changes.bulk_undo(bulk, actor=request.user)
    except errors.TicketActionError as error:
        messages.error(request, f"Not undone: {error}.")
    else:
        messages.success(request, outcome.summary("reopened"))
        for stale in outcome.stale[:5]:
            messages.warning(request, str(stale))
    request.session.pop(UNDO_SESSION_KEY, None)
    back = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        # As a URL, never a view name: redirect("foo") would look "foo" up and fail.
        return HttpResponseRedirect(back)
    return redirect("ticket-queue")
