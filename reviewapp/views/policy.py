"""Authority decisions in the browser: propose, approve, publish, and read versions."""

from __future__ import annotations

import json
import uuid

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_POST

from reviewapp.accounts.roles import APPROVE_RULE, PROPOSE_RULE, WORK_TICKET
from reviewapp.engine import PolicyError
from reviewapp.forms.fields import whole_number
from reviewapp.forms.policy import DecisionForm, ImportForm, ProposalForm, PublishForm
from reviewapp.judging.policies import default_policy_document
from reviewapp.models import PolicyVersion, RuleProposal, Ticket, policy_name
from reviewapp.policy import settlements, versions
from reviewapp.policy.documents import describe_change, describe_rule, diff_documents, overlaps
from reviewapp.policy.versions import (
    FourEyesError,
    PolicyWorkError,
    active_document,
    approved_unpublished,
    draft_document,
)
from reviewapp.replay.impact import (
    draft_impact_start,
    pending_impacts_start,
    proposal_impact_start,
)
from reviewapp.review.errors import TicketActionError
from reviewapp.review.stamp import DataStamp, data_stamp
from reviewapp.views import review_bulk
from reviewapp.views.replay import impact_context, impact_found

VERSIONS_PER_PAGE = 20


def _rules(document: dict) -> list[tuple[dict, str]]:
    return [(rule, describe_rule(rule)) for rule in document.get("rules", [])]


@require_GET
def policy_home(request: HttpRequest) -> HttpResponse:
    versions = Paginator(
        PolicyVersion.objects.select_related("published_by"), VERSIONS_PER_PAGE
    ).get_page(request.GET.get("page"))
    pending = RuleProposal.objects.filter(state=RuleProposal.State.PENDING).select_related(
        "proposed_by"
    )
    number, document = active_document()
    context = {
        "page": versions,
        "pending": pending,
        "waiting": approved_unpublished(),
        "active_number": number,
        "active_rules": _rules(document),
        "import_form": ImportForm(),
    }
    return render(request, "policy/home.html", context)


@require_GET
def version_detail(request: HttpRequest, number: int) -> HttpResponse:
    version = get_object_or_404(PolicyVersion.objects.select_related("published_by"), number=number)
    settled = version.settlements.filter(ticket__state=Ticket.State.OPEN).count()
    # Of those, the ones its base settles already: the rest are its own change's.
    before = settlements.settled_before(version) if settled else 0
    labelling = settlements.labelling_under_way(version)
    if request.GET.get("part") == "settled":
        return render(
            request,
            "policy/version.html#settled-summary",
            {
                "version": version,
                "settled_open": settled,
                "settled_before": before,
                "settled_own": settled - before,
                "labelling": labelling,
            },
        )
    context = {
        "labelling": labelling,
        "version": version,
        "rules": _rules(version.document),
        "document_json": json.dumps(
            versions.policy_version_export(version), indent=2, ensure_ascii=False
        ),
        "proposals": version.proposals.select_related("proposed_by", "decided_by"),
        "settled_open": settled,
        "settled_before": before,
        "settled_own": settled - before,
        "previous": PolicyVersion.objects.filter(number__lt=number).order_by("-number").first(),
    }
    return render(request, "policy/version.html", context)


@require_GET
def version_export(request: HttpRequest, number: int) -> JsonResponse:
    version = get_object_or_404(PolicyVersion, number=number)
    response = JsonResponse(
        versions.policy_version_export(version),
        json_dumps_params={"indent": 2, "ensure_ascii": False},
    )
    response["Content-Disposition"] = f'attachment; filename="policy-v{number}.json"'
    return response


def _last_two_published() -> tuple[str, str]:
    """What the diff page compares unless told: the last two published versions (the
    built-in default before the first; the draft while nothing is published)."""
    newest = list(PolicyVersion.objects.order_by("-number").values_list("number", flat=True)[:2])
    if not newest:
        return "0", "draft"
    return (str(newest[1]) if len(newest) > 1 else "0"), str(newest[0])


def _document_for(label: str) -> tuple[str, dict]:
    """ "draft", a version number, or "0" for the built-in default."""
    if label == "draft":
        return "draft", draft_document()
    number = whole_number(label)
    if number:
        version = get_object_or_404(PolicyVersion, number=number)
        return policy_name(version), dict(version.document)
    return policy_name(0), default_policy_document()


@require_GET
def version_diff(request: HttpRequest) -> HttpResponse:
    default_from, default_to = _last_two_published()
    from_value = request.GET.get("from") or default_from
    to_value = request.GET.get("to") or default_to
    old_label, old = _document_for(from_value)
    new_label, new = _document_for(to_value)
    context = {
        "old_label": old_label,
        "new_label": new_label,
        "diff": diff_documents(old, new).lines(),
        "versions": [str(n) for n in PolicyVersion.objects.values_list("number", flat=True)],
        "from_value": from_value,
        "to_value": to_value,
    }
    return render(request, "policy/diff.html", context)


def _initial_from_ticket(request: HttpRequest) -> tuple[dict, list[Ticket]]:
    """Prefill a proposal from the ticket (or its whole family) that motivated it."""
    ticket_id, family = request.GET.get("ticket"), request.GET.get("family", "")
    # A fingerprint is 16 hex digits: anything else (a NUL, say) names no family.
    family = family if family.isascii() and family.isalnum() and len(family) <= 64 else ""
    tickets: list[Ticket] = []
    if (pk := whole_number(ticket_id)) is not None:
        tickets = list(Ticket.objects.filter(pk=pk))
    elif family:
        tickets = list(Ticket.objects.filter(fingerprint=family, state=Ticket.State.OPEN)[:500])
    if not tickets:
        return {}, []
    first = tickets[0]
    sources = [s for s in first.sources.split(",") if s]
    initial = {
        "kind": "authoritative-source",
        "field": first.field,
        "actions": first.action,
        # The first of its sources chosen; the others are offered beside it.
        "source_choice": sources[0] if sources else "",
        "tickets": ",".join(str(t.pk) for t in tickets),
        "family": family or "",
    }
    return initial, tickets


def _tickets_sources(tickets: list[Ticket]) -> list[str]:
    """The sources of the motivating tickets' observations: what the decision chooses from."""
    return sorted({source for ticket in tickets for source in ticket.sources.split(",") if source})


@permission_required(PROPOSE_RULE, raise_exception=True)
def propose_view(request: HttpRequest) -> HttpResponse:
    preview: dict = {}
    if request.method == "POST":
        form = ProposalForm(request.POST)
        tickets = list(Ticket.objects.filter(pk__in=form.ticket_ids()))
        form.offer_sources(_tickets_sources(tickets))
        if form.is_valid():
            kind, change = form.change()
            try:
                proposal = versions.proposal_create(
                    user=request.user,
                    kind=kind,
                    change=change,
                    rationale=form.cleaned_data["rationale"],
                    tickets=tickets,
                )
            except (PolicyError, PolicyWorkError, ValueError) as exc:
                form.add_error(None, str(exc))
            else:
                proposal_impact_start(proposal, user=request.user)
                messages.success(
                    request,
                    f"Proposal #{proposal.pk} recorded: it now needs another person's approval.",
                )
                return redirect("proposal-detail", pk=proposal.pk)
        # Refused: the page comes back with what the posted decision would do.
        preview = _preview_context(request.POST.dict())
    else:
        initial, tickets = _initial_from_ticket(request)
        form = ProposalForm(initial=initial)
        form.offer_sources(_tickets_sources(tickets))
        if initial:
            # Prefilled from a ticket: what it means is shown on arrival, as typing would.
            preview = _preview_context(initial)
    context = {"form": form, "motivating": tickets, "sources": _tickets_sources(tickets)}
    return render(request, "policy/propose.html", {**preview, **context})


@require_POST
@permission_required(PROPOSE_RULE, raise_exception=True)
def propose_preview(request: HttpRequest) -> HttpResponse:
    """What the change means, and which open tickets it would settle (nothing is saved)."""
    context = _preview_context(request.POST.dict())
    return render(request, "policy/propose.html#proposal-preview", context)


def _preview_context(data: dict) -> dict:
    """The preview of a proposal's form data: its sentence, overlaps and the tickets it
    would settle, or why it cannot say (empty while the form is incomplete)."""
    form = ProposalForm({**data, "rationale": data.get("rationale") or "preview"})
    context: dict = {}
    if form.is_valid():
        kind, change = form.change()
        try:
            settled, considered = settlements.settlement_preview(
                kind, change, motivating=form.ticket_ids()
            )
            context.update(
                sentence=describe_change(kind, change),
                overlaps=_overlaps_in_draft(kind, change),
                settled=settled,
                considered=considered,
                preview_limit=settlements.PREVIEW_TICKET_LIMIT,
                active_name=policy_name(active_document()[0]),
            )
        except (PolicyError, ValueError) as exc:
            context["error"] = str(exc)
    return context


def _overlaps_in_draft(kind: str, change: dict) -> list[str]:
    if kind == "document":
        return []
    try:
        return overlaps(draft_document(), kind, change)
    except (PolicyError, ValueError):  # the draft itself is refused: its page says why
        return []


@require_GET
def proposal_list(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state", "pending")
    proposals = RuleProposal.objects.select_related("proposed_by", "decided_by", "published_in")
    if state in RuleProposal.State.values:
        proposals = proposals.filter(state=state)
    page = Paginator(proposals, 25).get_page(request.GET.get("page"))
    return render(
        request, "policy/proposals.html", {"page": page, "state": state, "query": f"state={state}"}
    )


@require_GET
def proposal_detail(request: HttpRequest, pk: int) -> HttpResponse:
    proposal = get_object_or_404(
        RuleProposal.objects.select_related("proposed_by", "decided_by", "published_in"), pk=pk
    )
    can_decide = (
        request.user.has_perm(APPROVE_RULE)
        and proposal.state == RuleProposal.State.PENDING
        and proposal.proposed_by_id != request.user.pk
    )
    show_impact = proposal.state != RuleProposal.State.REJECTED and proposal.published_in_id is None
    context = {
        "proposal": proposal,
        # What a pending proposal meets in the draft it would be added to.
        "overlaps": _overlaps_in_draft(proposal.kind, proposal.change)
        if proposal.state == RuleProposal.State.PENDING
        else [],
        "tickets": proposal.tickets.select_related("run")[:50],
        "change_json": json.dumps(proposal.change, indent=2, ensure_ascii=False),
        "can_decide": can_decide,
        "form": DecisionForm(),
        # Its impact (views.replay), measured when it was proposed: while it is undecided
        # or waits in the draft, what it would change is what an approver needs to see.
        "show_impact": show_impact,
        **impact_context(
            request, impact_found("proposal", pk) if show_impact else None, "proposal", pk
        ),
    }
    return render(request, "policy/proposal.html", context)


@require_POST
@permission_required(APPROVE_RULE, raise_exception=True)
def proposal_decide(request: HttpRequest, pk: int) -> HttpResponse:
    proposal = get_object_or_404(RuleProposal, pk=pk)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose approve or reject.")
        return redirect("proposal-detail", pk=pk)
    try:
        versions.proposal_decide(
            proposal=proposal,
            user=request.user,
            approve=form.cleaned_data["decision"] == "approve",
            reason=form.cleaned_data["reason"],
        )
    except FourEyesError as exc:
        raise PermissionDenied(str(exc)) from exc
    except (PolicyError, PolicyWorkError, ValueError) as exc:
        messages.error(request, str(exc))
    else:
        approved = form.cleaned_data["decision"] == "approve"
        if approved:  # the draft changed: whoever publishes it sees what it would do
            draft_impact_start(user=request.user)
        messages.success(request, f"Proposal #{pk} {'approved' if approved else 'rejected'}.")
    return redirect("proposal-detail", pk=pk)


@require_GET
def draft_view(request: HttpRequest) -> HttpResponse:
    number, active = active_document()
    error, draft = None, active
    try:
        draft = draft_document()
    except (PolicyError, ValueError) as exc:
        error = str(exc)
    waiting = approved_unpublished()
    context = {
        "active_number": number,
        "waiting": waiting,
        "diff": diff_documents(active, draft).lines(),
        "draft_json": json.dumps(draft, indent=2, ensure_ascii=False),
        "error": error,
        "form": PublishForm(),
        # What the approved changes would do, measured when the last was approved.
        **impact_context(
            request, impact_found("draft") if waiting and not error else None, "draft"
        ),
    }
    return render(request, "policy/draft.html", context)


@require_POST
@permission_required(APPROVE_RULE, raise_exception=True)
def publish_view(request: HttpRequest) -> HttpResponse:
    form = PublishForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Say why this version is published.")
        return redirect("policy-draft")
    try:
        version = versions.policy_version_publish(
            user=request.user, reason=form.cleaned_data["reason"]
        )
    except (PolicyError, PolicyWorkError, ValueError) as exc:
        messages.error(request, str(exc))
        return redirect("policy-draft")
    # The pending proposals now apply to a new draft: what each would do is measured again.
    pending_impacts_start(user=request.user)
    messages.success(
        request,
        format_html(
            "Published v{}: it judges everything ingested from now on. A worker labels the open "
            'tickets it would settle: <a href="{}">see them</a>.',
            version.number,
            reverse("policy-settled", args=[version.number]),
        ),
    )
    return redirect("policy-version", number=version.number)


@require_POST
@permission_required(PROPOSE_RULE, raise_exception=True)
def import_view(request: HttpRequest) -> HttpResponse:
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        if form.has_error("document", "too_large"):
            messages.error(request, f"Not imported: {form.errors['document'][0]}.")
        else:
            messages.error(request, "Choose a policy file and say why.")
        return redirect("policy-home")
    try:
        document = json.loads(form.cleaned_data["document"].read().decode("utf-8"))
        proposal = versions.policy_document_import(
            user=request.user, document=document, rationale=form.cleaned_data["rationale"]
        )
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        messages.error(request, f"Not a JSON document: {exc}")
        return redirect("policy-home")
    except (PolicyError, PolicyWorkError) as exc:
        messages.error(
            request, f"Not a valid policy: {'; '.join(getattr(exc, 'errors', [str(exc)]))}"
        )
        return redirect("policy-home")
    proposal_impact_start(proposal, user=request.user)
    messages.success(
        request, f"Imported as proposal #{proposal.pk}: it needs another person's approval."
    )
    return redirect("proposal-detail", pk=proposal.pk)


@require_GET
def settled_tickets(request: HttpRequest, number: int) -> HttpResponse:
    version = get_object_or_404(PolicyVersion, number=number)
    page = Paginator(
        settlements.settled_open_tickets(version).prefetch_related("settlements"), 50
    ).get_page(request.GET.get("page"))
    context = {
        "version": version,
        "page": page,
        "seen": data_stamp().text,
        "labelling": settlements.labelling_under_way(version),
        "undo": review_bulk.undo_offer(request) if request.user.has_perm(WORK_TICKET) else None,
    }
    return render(request, "policy/settled.html", context)


@require_POST
@permission_required(WORK_TICKET, raise_exception=True)
def close_settled_view(request: HttpRequest, number: int) -> HttpResponse:
    """First what it would close (held tickets named) and a confirmation; then the close,
    which its author may undo for a while, like a bulk close from the queue."""
    version = get_object_or_404(PolicyVersion, number=number)
    try:
        seen = DataStamp.from_text(request.POST.get("seen", ""))
    except TicketActionError as error:
        messages.error(request, f"Not applied: {error}.")
        return redirect("policy-settled", number=number)
    back = reverse("policy-settled", args=[number])
    if request.POST.get("confirmed") != "1":
        expected = settlements.settled_as_seen(version, seen)
        if not expected:
            messages.warning(request, "No open ticket is waiting on this version.")
            return redirect(back)
        action = reverse("policy-close-settled", args=[number])
        return review_bulk.bulk_confirmation(request, expected, action=action, back=back)
    bulk = uuid.uuid4().hex
    outcome = settlements.settled_tickets_close(
        version=version, actor=request.user, seen=seen, bulk=bulk
    )
    if outcome.changed:
        request.session[review_bulk.UNDO_SESSION_KEY] = {
            "bulk": bulk,
            "count": len(outcome.changed),
        }
    messages.success(request, outcome.summary("closed"))
    for stale in outcome.stale[:5]:
        messages.warning(request, str(stale))
    return redirect(back)
