"""Replay jobs in the browser: the list (who started what), a job with its live progress,
cancel and retry, what it found by category down to each group, and the impact a proposal
or the draft would have (composed into their pages by views.policy)."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.paginator import Paginator
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HTMX_STOP_POLLING

from reviewapp.accounts.roles import RUN_REPLAY
from reviewapp.durable import worker_silent_since
from reviewapp.engine import PolicyError
from reviewapp.forms.replay import ReplayForm
from reviewapp.models import (
    PolicyCandidate,
    PolicyVersion,
    ReplayJob,
    ReplayResult,
    RuleProposal,
    draft_name,
    policy_name,
    proposal_name,
)
from reviewapp.policy.candidates import (
    candidate_of_draft,
    candidate_of_proposal,
    made_candidate_of_draft,
    made_candidate_of_proposal,
)
from reviewapp.policy.versions import active_document
from reviewapp.replay import results
from reviewapp.replay.compare import FLAGS
from reviewapp.replay.fixtures import FixtureError
from reviewapp.replay.impact import (
    Impact,
    candidate_for,
    impact,
    impact_superseded,
    replay_open_tickets,
)
from reviewapp.replay.jobs import ReplayError, job_cancel, job_progress, job_retry
from reviewapp.views.htmx import HtmxHttpRequest

JOBS_PER_PAGE = 25
RESULTS_PER_PAGE = 50


def _job_or_404(pk: int) -> ReplayJob:
    return get_object_or_404(
        ReplayJob.objects.select_related(
            "fixture_set",
            "candidate",
            "baseline",
            "started_by",
            "cancelled_by",
            "candidate__proposal",
        ),
        pk=pk,
    )


@require_GET
def job_list(request: HttpRequest) -> HttpResponse:
    jobs = ReplayJob.objects.select_related("fixture_set", "candidate", "started_by")
    state = request.GET.get("state", "")
    if state in ReplayJob.State.values:
        jobs = jobs.filter(state=state)
    page = Paginator(jobs, JOBS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "state": state,
        "states": ReplayJob.State.values,
        "query": f"state={state}" if state else "",
        "can_run": request.user.has_perm(RUN_REPLAY),
        "policy_choices": policy_choices() if request.user.has_perm(RUN_REPLAY) else [],
    }
    return render(request, "replay/jobs.html", context)


@require_POST
@permission_required(RUN_REPLAY, raise_exception=True)
def open_tickets_replay(request: HttpRequest) -> HttpResponse:
    """Every open ticket, as the desk is now, replayed under the policy chosen."""
    form = ReplayForm(request.POST)
    try:
        if not form.is_valid():
            raise ReplayError("choose what to replay under")
        candidate = candidate_for(*form.choice(), user=request.user)
        job = replay_open_tickets(candidate, user=request.user, reason="every open ticket")
    except (ReplayError, FixtureError, PolicyError, ValueError) as exc:
        messages.error(request, f"Not started: {exc}.")
        return redirect("replay-jobs")
    return redirect("replay-job", pk=job.pk)


def policy_choices() -> list[tuple[str, str]]:
    """What a replay can be under: the draft, a proposal applied to the active version, a
    version, each by its one name (models.policy_name)."""
    numbers = list(PolicyVersion.objects.values_list("number", flat=True)[:50])
    active = numbers[0] if numbers else 0
    proposals = RuleProposal.objects.filter(
        state__in=(RuleProposal.State.PENDING, RuleProposal.State.APPROVED),
        published_in__isnull=True,
    ).values_list("pk", "sentence")[:50]
    return (
        [("draft", f"{draft_name(active)} (every approved proposal applied)")]
        + [
            (f"proposal-{pk}", f"{proposal_name(active, pk)}: {text[:80]}")
            for pk, text in proposals
        ]
        + [(f"v{number}", policy_name(number)) for number in numbers]
    )


def _progress_context(request: HttpRequest, job: ReplayJob) -> dict:
    progress = job_progress(job)
    return {
        "job": job,
        "progress": progress,
        "counts": progress.counts,
        "count_rows": results.count_rows(progress.counts),
        "label": results.as_if_label(job),
        "categories": results.CATEGORIES,
        "can_run": request.user.has_perm(RUN_REPLAY),
        "worker_silent": None if job.is_finished else worker_silent_since(),
    }


@require_GET
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = _job_or_404(pk)
    context = {**_progress_context(request, job), "against": results.baseline_label(job)}
    return render(request, "replay/job.html", context)


@require_GET
def job_progress_view(request: HttpRequest, pk: int) -> HttpResponse:
    """The progress part, polled every second while the job runs; 286 stops htmx polling."""
    job = _job_or_404(pk)
    response = render(request, "replay/job.html#job-progress", _progress_context(request, job))
    if job.is_finished:
        response.status_code = HTMX_STOP_POLLING
    return response


@require_POST
@permission_required(RUN_REPLAY, raise_exception=True)
def job_cancel_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    job = _job_or_404(pk)
    if job_cancel(job, user=request.user):
        messages.success(request, f"Replay #{job.pk} cancelled: no more of it will be judged.")
    else:
        messages.error(request, f"Replay #{job.pk} had already ended ({job.state}).")
    return redirect("replay-job", pk=pk)


@require_POST
@permission_required(RUN_REPLAY, raise_exception=True)
def job_retry_view(request: HttpRequest, pk: int) -> HttpResponse:
    job = _job_or_404(pk)
    if job_retry(job, user=request.user):
        messages.success(request, f"Replay #{job.pk} sent again: what it finished is kept.")
    else:
        messages.error(
            request, f"Replay #{job.pk} is {job.state}: only a failed or cancelled one is retried."
        )
    return redirect("replay-job", pk=pk)


@require_GET
def job_changes(request: HttpRequest, pk: int) -> HttpResponse:
    job = _job_or_404(pk)
    category = request.GET.get("category", "changed")
    if category not in results.CATEGORIES:
        raise Http404("no such category")
    page = Paginator(results.results_in(job, category), RESULTS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    rows = [(result, results.flags_of(result)) for result in page.object_list]
    context = {
        "job": job,
        "page": page,
        "rows": rows,
        "category": category,
        "category_label": results.CATEGORIES[category],
        "categories": results.CATEGORIES,
        "label": results.as_if_label(job),
        "against": results.baseline_label(job),
        "query": f"category={category}",
    }
    return render(request, "replay/changes.html", context)


@require_GET
def job_group(request: HttpRequest, pk: int, result_id: int) -> HttpResponse:
    job = _job_or_404(pk)
    result = get_object_or_404(
        ReplayResult.objects.select_related(
            "run",
            "ticket",
            "recorded_judgement",
            "recorded_verdict",
            "prospective_verdict",
            "recorded_finding",
            "prospective_finding",
        ),
        pk=result_id,
        job=job,
    )
    result.job = job  # with its candidate and fixture set, read once
    recorded = result.recorded_judgement
    context = {
        "job": job,
        "result": result,
        "flags": results.flags_of(result),
        "label": results.as_if_label(job),
        "recorded_label": results.side_label(job, recorded),
        "observations": results.observations(result),
        "json": json.dumps(
            results.result_json(result, results.prospective_label(job)),
            indent=2,
            ensure_ascii=False,
        ),
    }
    return render(request, "replay/group.html", context)


@require_GET
def job_json(request: HttpRequest, pk: int) -> JsonResponse:
    return JsonResponse(results.job_json(_job_or_404(pk)), json_dumps_params={"indent": 2})


@require_GET
def job_results_export(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    job = _job_or_404(pk)
    category = request.GET.get("category", "changed")
    if category not in results.CATEGORIES:
        raise Http404("no such category")
    lines = (
        json.dumps(row, ensure_ascii=False) + "\n" for row in results.results_lines(job, category)
    )
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="replay-{job.pk}-{category}.jsonl"'
    return response


# --- impact on the proposal and draft pages ---------------------------------------------


def _candidate(kind: str, pk: int, user) -> PolicyCandidate:
    if kind == "draft":
        return candidate_of_draft(user=user)
    if kind == "proposal":
        return candidate_of_proposal(get_object_or_404(RuleProposal, pk=pk), user=user)
    raise Http404("no such candidate")


def impact_found(kind: str, pk: int = 0) -> Impact | None:
    """The candidate's impact as measured so far against the active version; else one
    measured against an older version, shown as out of date; None when nothing was measured,
    or it makes no valid policy. Reads only: a page that shows it starts nothing, and makes
    nothing in its reader's name."""
    proposal = None
    try:
        if kind == "draft":
            candidate = made_candidate_of_draft()
        elif kind == "proposal":
            proposal = get_object_or_404(RuleProposal, pk=pk)
            candidate = made_candidate_of_proposal(proposal)
        else:
            raise Http404("no such candidate")
    except (PolicyError, ValueError):  # the active version refuses it: the page says why
        return None
    if candidate is not None:
        return impact(candidate)
    active, _ = active_document()
    return impact_superseded(kind, proposal, active)


@require_http_methods(["GET", "POST"])
def impact_view(request: HttpRequest, kind: str, pk: int = 0) -> HttpResponse:
    """GET: the candidate's replays as they are (polled while any runs: 286 once all ended).
    POST: start those missing or out of date (a new snapshot of the desk with `again`)."""
    if request.method == "GET":
        found = impact_found(kind, pk)
    elif not request.user.has_perm(RUN_REPLAY):
        return HttpResponse("You may not start replays.", status=403)
    else:
        try:
            candidate = _candidate(kind, pk, request.user)
        except (PolicyError, ValueError) as exc:
            context = impact_context(request, None, kind, pk)
            return render(request, "replay/_impact.html", {**context, "refused": str(exc)})
        found = impact(
            candidate, user=request.user, start=True, again=request.POST.get("again") == "1"
        )
    response = render(request, "replay/_impact.html", impact_context(request, found, kind, pk))
    if request.method == "GET" and (found is None or found.finished):
        response.status_code = HTMX_STOP_POLLING
    return response


def impact_context(request: HttpRequest, found: Impact | None, kind: str, pk: int = 0) -> dict:
    """What templates/replay/_impact.html shows (`found` None: nothing measured yet)."""
    open_rows: list[tuple[str, str, int]] = []
    if found is not None:
        for job in found.jobs:
            job.live = None if job.is_finished else job_progress(job)  # type: ignore[attr-defined]
        done = found.open_tickets
        if done is not None and done.state == ReplayJob.State.DONE:
            open_rows = [(name, what, done.counts.get(name, 0)) for name, what in FLAGS.items()]
    return {
        "impact": found,
        "impact_url": reverse("replay-impact-draft")
        if kind == "draft"
        else reverse("replay-impact-proposal", args=[pk]),
        "open_rows": open_rows,
        "can_run": request.user.has_perm(RUN_REPLAY),
    }
