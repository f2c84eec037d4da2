"""The redaction rules page: the versions and the rules in force, and a form for the next
version (admins only: MANAGE_REDACTION, checked here on the server). A refused set is
shown back with the refusal (the runs and fields it would change)."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from reviewapp.accounts.roles import MANAGE_REDACTION
from reviewapp.forms.privacy import RedactionRulesForm
from reviewapp.forms.review import form_errors
from reviewapp.models import RedactionRuleSet
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
