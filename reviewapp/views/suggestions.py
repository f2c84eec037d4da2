"""Suggested rules in the browser: the list, one suggestion with its evidence, counter-examples
and impact, and the two things a person does with it (propose it, dismiss it). Nothing here
computes a suggestion: a worker does (reviewapp/suggestions/work.py)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HTMX_STOP_POLLING

from reviewapp.accounts.roles import PROPOSE_RULE
from reviewapp.engine import PolicyError
from reviewapp.models import RuleSuggestion, SuggestionDismissal
from reviewapp.policy.versions import PolicyWorkError
from reviewapp.replay.impact import impact
from reviewapp.suggestions import decisions, work
from reviewapp.views.replay import impact_context


def _suggestion_or_404(suggestion: int) -> RuleSuggestion:
    return get_object_or_404(work.annotated().select_related("candidate"), pk=suggestion)


@require_GET
def suggestion_list(request: HttpRequest) -> HttpResponse:
    suggestions = list(work.annotated())
    dismissals = {
        (d.key, d.evidence_stamp): d
        for d in SuggestionDismissal.objects.select_related("dismissed_by").order_by("id")
    }
    for suggestion in suggestions:
        found = dismissals.get((suggestion.key, suggestion.evidence_stamp))
        suggestion.dismissal = found  # type: ignore[attr-defined]
    context = {
        "ready": [s for s in suggestions if not s.dismissed and not s.proposed],  # type: ignore[attr-defined]
        "proposed": [s for s in suggestions if s.proposed],  # type: ignore[attr-defined]
        "dismissed": [s for s in suggestions if s.dismissed and not s.proposed],  # type: ignore[attr-defined]
    }
    return render(request, "suggestions/list.html", context)


def _impact_of(request: HttpRequest, suggestion: RuleSuggestion) -> dict:
    found = impact(suggestion.candidate) if suggestion.candidate is not None else None
    context = impact_context(request, found, "draft")
    # Polled here; replayed again only by the worker, or once it is a proposal.
    context.update(
        impact_url=reverse("suggestion-impact", args=[suggestion.pk]),
        can_run=False,
        # Its candidate is a policy file to the replay: named for what it is here.
        candidate_name=(
            f"{suggestion.candidate.base_label} + this suggested rule"
            if suggestion.candidate is not None
            else ""
        ),
    )
    return context


@require_GET
def suggestion_detail(request: HttpRequest, suggestion: int) -> HttpResponse:
    found = _suggestion_or_404(suggestion)
    evidence = decisions.suggestion_evidence(found)
    dismissal = (
        SuggestionDismissal.objects.filter(key=found.key, evidence_stamp=found.evidence_stamp)
        .select_related("dismissed_by")
        .first()
    )
    context = {
        "suggestion": found,
        "evidence": evidence,
        "dismissal": dismissal,
        "rationale": decisions.default_rationale(found),
        "can_decide": request.user.has_perm(PROPOSE_RULE),
        **_impact_of(request, found),
    }
    return render(request, "suggestions/detail.html", context)


@require_GET
def suggestion_impact(request: HttpRequest, suggestion: int) -> HttpResponse:
    """Its impact as measured so far (polled while replays run: 286 once all ended)."""
    context = _impact_of(request, _suggestion_or_404(suggestion))
    response = render(request, "replay/_impact.html", context)
    if context["impact"] is None or context["impact"].finished:
        response.status_code = HTMX_STOP_POLLING
    return response


@require_POST
@permission_required(PROPOSE_RULE, raise_exception=True)
def suggestion_propose(request: HttpRequest, suggestion: int) -> HttpResponse:
    found = _suggestion_or_404(suggestion)
    try:
        proposal = decisions.suggestion_propose(
            found, user=request.user, rationale=request.POST.get("rationale", "").strip()
        )
    except (PolicyError, PolicyWorkError, ValueError) as exc:
        messages.error(request, f"Not proposed: {exc}")
        return redirect("suggestion-detail", suggestion=found.pk)
    messages.success(
        request, f"Proposal #{proposal.pk} recorded: it now needs another person's approval."
    )
    return redirect("proposal-detail", pk=proposal.pk)


@require_POST
@permission_required(PROPOSE_RULE, raise_exception=True)
def suggestion_dismiss(request: HttpRequest, suggestion: int) -> HttpResponse:
    found = _suggestion_or_404(suggestion)
    try:
        decisions.suggestion_dismiss(
            found, user=request.user, reason=request.POST.get("reason", "")
        )
    except PolicyWorkError as exc:
        messages.error(request, f"Not dismissed: {exc}.")
        return redirect("suggestion-detail", suggestion=found.pk)
    messages.success(request, "Dismissed: it stays so until its evidence changes.")
    return redirect("suggestions")
