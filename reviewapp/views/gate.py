"""The gate in the browser: each action's gate mode and its history, what the live gate
answered (counted, and the recent answers), and the approver's choice of an action's mode."""

from __future__ import annotations

from datetime import date

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from reviewapp.accounts.roles import APPROVE_RULE
from reviewapp.forms.fields import window_asked
from reviewapp.forms.review import form_errors
from reviewapp.forms.shadow import GateModeForm
from reviewapp.gate.answers import DECISIONS, answer_counts, recent_answers
from reviewapp.gate.modes import GateModeError, mode_history, mode_set, modes_current
from reviewapp.reports.blocked import blocked_counts


@require_GET
def gate_page(request: HttpRequest) -> HttpResponse:
    window, window_error = window_asked(request.GET)
    current = {mode.action: mode for mode in modes_current()}
    gate = answer_counts(window)
    seen = {action for action, _ in gate.by_action if action}
    seen |= {value for value, _ in blocked_counts(window).by["action"] if value}
    actions = [(action, current.get(action)) for action in sorted(seen | set(current))]
    decision = request.GET.get("decision")
    try:
        day = date.fromisoformat(request.GET.get("day", ""))
    except ValueError:
        day = None
    context = {
        "window": window,
        "window_error": window_error,
        "actions": actions,
        "gate": gate,
        "history": mode_history(),
        "answers": recent_answers(decision=decision, action=request.GET.get("action"), day=day),
        "decision": decision,
        "decisions": DECISIONS,
        "day": day,
        "can_approve": request.user.has_perm(APPROVE_RULE),
        "form": GateModeForm(),
    }
    return render(request, "gate/page.html", context)


@require_POST
@permission_required(APPROVE_RULE, raise_exception=True)
def gate_mode_view(request: HttpRequest) -> HttpResponse:
    form = GateModeForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not changed: " + form_errors(form))
        return redirect("gate")
    try:
        chosen = mode_set(
            form.cleaned_data["action"],
            form.cleaned_data["mode"],
            user=request.user,
            reason=form.cleaned_data["reason"],
        )
    except GateModeError as exc:
        messages.error(request, f"Not changed: {exc}.")
    else:
        messages.success(request, f"The gate now answers {chosen.action} in {chosen.mode} mode.")
    return redirect("gate")
