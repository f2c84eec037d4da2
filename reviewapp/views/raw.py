"""Reading raw data on purpose: a POST that says why, from a person with the raw data
permission, answers with the raw lines and is recorded (privacy.access). A plain page view
never shows raw bytes, to anyone."""

from __future__ import annotations

from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_http_methods, require_POST

from reviewapp.accounts.roles import SEE_RAW_DATA
from reviewapp.models import Ticket, TraceLine
from reviewapp.privacy.access import RawAccessRefused, protected_value_read, raw_lines_read
from reviewapp.review.raw import Envelope, ticket_envelopes_read
from reviewapp.views.htmx import HtmxHttpRequest


@require_POST
@permission_required(SEE_RAW_DATA, raise_exception=True)
def ticket_raw(request: HtmxHttpRequest, ticket_id: int) -> HttpResponse:
    """The ticket's envelopes (the lines of its disputed observations, their calls and the
    action that followed)."""
    ticket = get_object_or_404(Ticket.objects.select_related("run"), pk=ticket_id)
    url = request.path
    try:
        envelopes = ticket_envelopes_read(request.user, ticket, reason=request.POST.get("reason"))
    except RawAccessRefused as refused:
        return _refused(request, refused, url)
    return _shown(request, envelopes, url)


@require_POST
@permission_required(SEE_RAW_DATA, raise_exception=True)
def line_raw(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """One line as it arrived (a batch's rejected line, a record's line)."""
    line = get_object_or_404(TraceLine.objects.select_related("batch"), pk=pk)
    url = request.path
    label = f"{line.batch.file_name}:{line.line_number}"
    try:
        raw_lines_read(
            request.user, [line], reason=request.POST.get("reason"), what=f"line {label}"
        )
    except RawAccessRefused as refused:
        return _refused(request, refused, url)
    return _shown(request, [Envelope(label, line)], url)


@require_http_methods(["GET", "POST"])
@permission_required(SEE_RAW_DATA, raise_exception=True)
def value_raw(request: HtmxHttpRequest) -> HttpResponse:
    """The raw value a redaction rule kept behind a token: a form (GET), the value (POST
    with the token and a reason, recorded)."""
    context: dict[str, object] = {"token": request.POST.get("token", request.GET.get("token", ""))}
    status = 200
    if request.method == "POST":
        try:
            value = protected_value_read(
                request.user, str(context["token"]), reason=request.POST.get("reason")
            )
        except RawAccessRefused as refused:
            if refused.forbidden:
                return _refused(request, refused, request.path)
            context |= {"raw_error": str(refused), "raw_reason": request.POST.get("reason", "")}
            status = 400
        else:
            context |= {"read": True, "value": value}
    template = "privacy/value.html"
    if request.htmx:
        template += "#protected-value"
    return render(request, template, context, status=status)


def _shown(request: HtmxHttpRequest, envelopes: list[Envelope], url: str) -> HttpResponse:
    template = "privacy/raw.html"
    if request.htmx:
        template += "#raw-lines"
    return render(request, template, {"envelopes": envelopes, "raw_url": url})


def _refused(request: HttpRequest, refused: RawAccessRefused, url: str) -> HttpResponse:
    if refused.forbidden:
        return HttpResponse(f"Not shown: {refused}.", status=403, content_type="text/plain")
    context = {
        "raw_url": url,
        "raw_error": str(refused),
        "raw_reason": request.POST.get("reason", ""),
    }
    return render(request, "privacy/_raw_form.html", context, status=400)
