"""The alerts page, admins only (checked here on the server): the destinations and what
each is subscribed to, a form to add one, and the recent alerts with every delivery and
failure. Alerts are raised and sent by workers (reviewapp.watch, reviewapp.alerts)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.db.models import Count, Prefetch, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from reviewapp.accounts.roles import MANAGE_ALERTS
from reviewapp.alerts.destinations import DestinationError, destination_add, destination_change
from reviewapp.alerts.kinds import KINDS
from reviewapp.forms.alerts import DestinationForm, SubscriptionsForm
from reviewapp.forms.review import form_errors
from reviewapp.models import Alert, AlertDelivery, AlertDestination
from reviewapp.views.htmx import HtmxHttpRequest

RECENT_ALERTS = 50


def _destinations() -> list[AlertDestination]:
    return list(
        AlertDestination.objects.annotate(
            delivered=Count("deliveries", filter=Q(deliveries__state=AlertDelivery.State.DONE)),
            failed=Count("deliveries", filter=Q(deliveries__state=AlertDelivery.State.FAILED)),
        )
    )


@require_GET
@permission_required(MANAGE_ALERTS, raise_exception=True)
def alerts_page(request: HttpRequest) -> HttpResponse:
    deliveries = AlertDelivery.objects.select_related("destination").order_by("destination__name")
    alerts = Alert.objects.prefetch_related(Prefetch("deliveries", queryset=deliveries))[
        :RECENT_ALERTS
    ]
    context = {
        "destinations": _destinations(),
        "alerts": alerts,
        "kinds": KINDS,
        "form": DestinationForm(),
    }
    return render(request, "alerts/alerts.html", context)


@require_POST
@permission_required(MANAGE_ALERTS, raise_exception=True)
def destination_add_view(request: HttpRequest) -> HttpResponse:
    form = DestinationForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not added: " + form_errors(form))
        return redirect("alerts")
    try:
        added = destination_add(**form.cleaned_data, user=request.user)
    except DestinationError as exc:
        messages.error(request, f"Not added: {exc}.")
        return redirect("alerts")
    messages.success(request, f"Destination {added.name} added.")
    return redirect("alerts")


@require_POST
@permission_required(MANAGE_ALERTS, raise_exception=True)
def destination_change_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    destination = get_object_or_404(AlertDestination, pk=pk)
    form = SubscriptionsForm(request.POST)
    refusal = ""
    if not form.is_valid():
        refusal = form_errors(form)
    else:
        try:
            destination_change(destination, **form.cleaned_data, user=request.user)
        except DestinationError as exc:
            refusal = str(exc)
    if not request.htmx:
        if refusal:
            messages.error(request, f"Not saved: {refusal}.")
        else:
            messages.success(request, f"Destination {destination.name} saved.")
        return redirect("alerts")
    shown = next(item for item in _destinations() if item.pk == destination.pk)
    context = {"destination": shown, "kinds": KINDS, "refusal": refusal, "saved": not refusal}
    return render(request, "alerts/alerts.html#destination-row", context)
