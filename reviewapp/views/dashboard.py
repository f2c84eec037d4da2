from django.db.models import Count, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from reviewapp.judging.policies import active_policy
from reviewapp.models import IngestBatch, Run
from reviewapp.review.counts import facet_counts
from reviewapp.review.queue import QueueFilters


@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    judged = Run.objects.aggregate(
        runs=Count("id"),
        verdicts=Sum("current_judgement__verdict_count"),
        conflicts=Sum("current_judgement__conflict_count"),
        unsafe=Sum("current_judgement__unsafe_count"),
        findings=Sum("current_judgement__finding_count"),
    )
    context = {
        "active": active_policy(),
        "open_tickets": facet_counts(QueueFilters(), request.user),
        "judged": judged,
        "batches": IngestBatch.objects.select_related("created_by")[:5],
    }
    return render(request, "dashboard.html", context)
