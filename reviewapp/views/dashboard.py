from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from reviewapp.policies import active_policy
from reviewapp.tickets import QueueFilters, facet_counts


def dashboard(request: HttpRequest) -> HttpResponse:
    open_tickets = facet_counts(QueueFilters(), request.user)
    return render(
        request,
        "dashboard.html",
        {"policy": active_policy().policy, "open_tickets": open_tickets},
    )
