"""POST /api/v1/check: an agent harness asks before a side effect (reviewapp.gate)."""

from __future__ import annotations

import time

from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from reviewapp.gate.check import check, check_refuse, check_refused_unread, check_too_large
from reviewapp.views.ingest_api import token_or_error


@csrf_exempt  # a bearer token, not a cookie, authenticates these requests
@login_not_required
@require_POST
def post_check(request: HttpRequest) -> JsonResponse:
    started = time.perf_counter()
    token = token_or_error(request)
    if isinstance(token, JsonResponse):
        return token
    refused = check_refused_unread(
        content_type=request.headers.get("Content-Type", ""),
        declared_length=request.headers.get("Content-Length", ""),
    )
    if refused is None:
        try:
            body = request.body
        except RequestDataTooBig:
            refused = check_too_large()
        else:
            status, answer = check(body, token=token, started=started)
            return JsonResponse(answer, status=status)
    status, answer = check_refuse(refused, token=token, started=started)
    return JsonResponse(answer, status=status)
