"""Bulk work from the queue: assign or close the checked tickets (or a whole family), a
close first shown and confirmed, and undone for a while by its author."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
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
    """Assign or close the checked tickets, or every open ticket of one family."""
    filters = queue.queue_filters(request.POST)
    form = review_forms.BulkForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Not applied: {review_forms.form_errors(form)}.")
        return redirect(queue_url(filters))
    data = form.cleaned_data
    try:
        if data["whole_family"]:
            seen = stamp.DataStamp.from_text(data["seen"])
            expected = changes.family_revisions(data["whole_family"], seen)
        else:
            expected = form.selection(request.POST.getlist("selected"))
        if not expected:
            messages.warning(request, "Nothing was selected.")
            return redirect(queue_url(filters))
        if data["operation"] == "close" and request.POST.get("confirmed") != "1":
            # Say what the close would take, held tickets first, and ask.
            changes.check_closing(data["resolution"], data["cause"], data["cause_text"])
            return bulk_confirmation(
                request,
                expected,
                action=reverse("ticket-bulk"),
                back=queue_url(queue.queue_filters(request.POST)),
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


def bulk_confirmation(
    request: HttpRequest, expected: dict[int, int], *, action: str, back: str
) -> HttpResponse:
    """The tickets a bulk close would close, as they are now, and the same post again (to
    `action`) with `confirmed`: held tickets (someone else's above all) are named."""
    me = request.user.get_username()
    tickets: list[dict[str, Any]] = [
        {
            **row,
            "held_by_other": bool(row["assignee__username"]) and row["assignee__username"] != me,
        }
        for row in Ticket.objects.filter(pk__in=list(expected))
        .order_by("pk")
        .values("pk", "state", "reason", "field", "finding_kind", "entity", "assignee__username")
    ]
    posted = [
        (name, value)
        for name, values in request.POST.lists()
        if name not in ("csrfmiddlewaretoken", "confirmed")
        for value in values
    ]
    context = {
        "tickets": tickets,
        "held_by_others": [t for t in tickets if t["held_by_other"]],
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
