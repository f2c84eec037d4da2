"""The erasure page (admins only, checked here on the server): the requests and what each
touched, a form to request one, and another admin's approve or refuse. An approved
erasure runs in a worker (privacy/erasure.py)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from reviewapp.accounts.roles import ERASE_VALUES
from reviewapp.forms.privacy import ErasureForm
from reviewapp.forms.review import form_errors
from reviewapp.models import ErasureRequest
from reviewapp.privacy.erasure import ErasureError, erasure_decide, erasure_request


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
