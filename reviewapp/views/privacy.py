"""The privacy pages, admins only (checked here on the server): the redaction rules (the
versions, the rules in force, and a form for the next version: a refused set is shown back
with the runs and fields it would change), and erasure (the requests and what each
touched, a form to request one, and another admin's approve or refuse; an approved
erasure runs in a worker, privacy/erasure.py)."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from reviewapp.accounts.roles import ERASE_VALUES, MANAGE_REDACTION
from reviewapp.forms.privacy import ErasureForm, RedactionRulesForm
from reviewapp.forms.review import form_errors
from reviewapp.models import ErasureRequest, RedactionRuleSet
from reviewapp.privacy.erasure import ErasureError, erasure_decide, erasure_request
from reviewapp.privacy.rules import RuleError
from reviewapp.privacy.versions import active_document, read_rules_text, redaction_set


@require_http_methods(["GET", "POST"])
@permission_required(MANAGE_REDACTION, raise_exception=True)
def redaction(request: HttpRequest) -> HttpResponse:
    refusal = ""
    active = active_document()
    form = RedactionRulesForm(
        initial={"document": json.dumps(active, indent=2, ensure_ascii=False)}
    )
    if request.method == "POST":
        form = RedactionRulesForm(request.POST)
        if not form.is_valid():
            refusal = form_errors(form)
        else:
            try:
                version = redaction_set(
                    read_rules_text(form.cleaned_data["document"]),
                    user=request.user,
                    reason=form.cleaned_data["reason"],
                )
            except RuleError as exc:
                refusal = str(exc)
            else:
                messages.success(request, f"Redaction v{version.number} is in force.")
                return redirect("redaction")
    versions = RedactionRuleSet.objects.select_related("created_by")[:50]
    return render(
        request,
        "privacy/redaction.html",
        {"form": form, "refusal": refusal, "versions": versions, "active": active},
    )


@require_GET
@permission_required(ERASE_VALUES, raise_exception=True)
def erasure_page(request: HttpRequest) -> HttpResponse:
    requests = ErasureRequest.objects.select_related("requested_by", "decided_by")[:200]
    return render(request, "privacy/erasure.html", {"requests": requests, "form": ErasureForm()})


@require_POST
@permission_required(ERASE_VALUES, raise_exception=True)
def erasure_request_view(request: HttpRequest) -> HttpResponse:
    form = ErasureForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not requested: " + form_errors(form))
        return redirect("erasure")
    try:
        made = erasure_request(
            form.cleaned_data["value"], user=request.user, reason=form.cleaned_data["reason"]
        )
    except ErasureError as exc:
        messages.error(request, f"Not requested: {exc}.")
        return redirect("erasure")
    messages.success(
        request, f"Erasure #{made.pk} of {made.token} requested: another admin must approve it."
    )
    return redirect("erasure")


@require_POST
@permission_required(ERASE_VALUES, raise_exception=True)
def erasure_decide_view(request: HttpRequest, pk: int) -> HttpResponse:
    approve = request.POST.get("decision") == "approve"
    try:
        decided = erasure_decide(pk, user=request.user, approve=approve)
    except ErasureRequest.DoesNotExist:
        messages.error(request, f"There is no erasure request #{pk}.")
    except ErasureError as exc:
        messages.error(request, f"Not decided: {exc}.")
    else:
        said = "approved: a worker erases the value now" if approve else "refused"
        messages.success(request, f"Erasure #{decided.pk} {said}.")
    return redirect("erasure")
