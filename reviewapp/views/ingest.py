"""Uploading traces in the browser, following batches, and managing API tokens."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from reviewapp.accounts.roles import INGEST
from reviewapp.durable import worker_silent_since
from reviewapp.forms.ingest import TokenForm, UploadForm
from reviewapp.ingest.batches import BatchNotRetryable, identical_note, retry_batch
from reviewapp.ingest.otel import SpanReport
from reviewapp.ingest.receive import DeliveryRefused, upload_receive
from reviewapp.ingest.tokens import create_token, revoke_token
from reviewapp.ingest.uploads import refused_uploads
from reviewapp.models import ApiToken, IngestBatch

BATCHES_PER_PAGE = 25
LINES_PER_PAGE = 50


def batch_list(request: HttpRequest) -> HttpResponse:
    form = UploadForm()
    if request.method == "POST":
        if not request.user.has_perm(INGEST):
            return HttpResponse("You may not upload traces.", status=403)
        form = UploadForm(request.POST, request.FILES)
        refused = refused_uploads(request)
        for name in refused:
            messages.error(
                request,
                f"{name}: over the {settings.INGEST_MAX_BYTES:,}-byte limit; not ingested.",
            )
        if form.is_valid():
            _accept_uploads(request, form.cleaned_data["files"])
            return redirect("batch-list")
        if refused:
            return redirect("batch-list")
    page = Paginator(IngestBatch.objects.select_related("created_by"), BATCHES_PER_PAGE).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "ingest/batch_list.html",
        {"form": form, "page": page, "can_ingest": request.user.has_perm(INGEST)},
    )


def _accept_uploads(request: HttpRequest, files) -> None:
    """Each file on its own: one that is refused or empty is named, and the others go on."""
    for upload in files:
        if not upload.size:
            messages.warning(request, f"{upload.name}: the file is empty; nothing to ingest.")
            continue
        try:
            received = upload_receive(upload, name=upload.name, user=request.user)
        except DeliveryRefused as refused:
            messages.error(request, f"{upload.name}: {refused}; not ingested.")
            continue
        batch_url = reverse("batch-detail", args=[received.batch.public_id])
        summary = received.summary
        if summary is None:
            size = received.batch.size_bytes
            messages.info(
                request,
                format_html(
                    '{}: queued for a worker ({} bytes). <a href="{}">Follow it</a>.',
                    upload.name,
                    f"{size:,}",
                    batch_url,
                ),
            )
        elif not summary.lines:
            messages.warning(request, f"{upload.name}: the file is empty; nothing to ingest.")
        else:
            ignored = (
                f", {summary.ignored:,} spans without a tool call ignored"
                if summary.ignored
                else ""
            )
            identical = f" ({identical_note(summary.identical)})" if summary.identical else ""
            messages.success(
                request,
                format_html(
                    "{}: {}, {} accepted, {} duplicates{}, {} rejected{}; {} opened. "
                    '<a href="{}">See the batch</a>.',
                    upload.name,
                    f"{summary.lines:,} line{pluralize(summary.lines)}",
                    f"{summary.accepted:,}",
                    f"{summary.duplicates:,}",
                    identical,
                    f"{summary.rejected:,}",
                    ignored,
                    f"{summary.tickets:,} ticket{pluralize(summary.tickets)}",
                    batch_url,
                ),
            )
            if summary.span_report.is_warning:
                messages.warning(request, f"{upload.name}: {summary.span_report.message()}.")


@require_GET
def batch_detail(request: HttpRequest, public_id) -> HttpResponse:
    batch = get_object_or_404(IngestBatch.objects.select_related("created_by"), public_id=public_id)
    rejected = Paginator(
        batch.trace_lines.filter(accepted=False).order_by("line_number"), LINES_PER_PAGE
    ).get_page(request.GET.get("page"))
    return render(
        request,
        "ingest/batch_detail.html",
        {"rejected": rejected, **_batch_state(request, batch)},
    )


def _batch_state(request: HttpRequest, batch: IngestBatch) -> dict:
    return {
        "batch": batch,
        "can_ingest": request.user.has_perm(INGEST),
        "worker_silent": None if batch.is_finished else worker_silent_since(),
        # An external format's spans: read, tool calls, dropped and why (a warning when
        # tool calls were lost or there were none).
        "span_report": SpanReport.of_json(batch.span_report) if batch.span_report else None,
        # A batch split into parts (ingest.parts): each worker's share and how far it is.
        "parts": list(batch.part_rows.all()) if batch.parts > 1 else [],
    }


@require_POST
@permission_required(INGEST, raise_exception=True)
def batch_retry(request: HttpRequest, public_id) -> HttpResponse:
    batch = get_object_or_404(IngestBatch, public_id=public_id)
    try:
        retry_batch(batch)
    except BatchNotRetryable as exc:
        messages.error(request, f"Not sent again: {exc}.")
    else:
        messages.success(request, "Sent to a worker again; lines already stored are kept.")
    return redirect("batch-detail", public_id=batch.public_id)


@require_GET
def batch_progress(request: HttpRequest, public_id) -> HttpResponse:
    batch = get_object_or_404(IngestBatch, public_id=public_id)
    return render(request, "ingest/batch_detail.html#batch-progress", _batch_state(request, batch))


@never_cache  # it shows a new token once: no copy of the page may be kept anywhere
@permission_required(INGEST, raise_exception=True)
def token_list(request: HttpRequest) -> HttpResponse:
    form, created = TokenForm(), None
    if request.method == "POST":
        form = TokenForm(request.POST)
        if form.is_valid():
            _, created = create_token(user=request.user, name=form.cleaned_data["name"])
            form = TokenForm()
    tokens = ApiToken.objects.filter(user_id=request.user.pk or 0)
    return render(
        request, "ingest/tokens.html", {"form": form, "tokens": tokens, "created": created}
    )


@require_POST
@permission_required(INGEST, raise_exception=True)
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    revoke_token(get_object_or_404(ApiToken, pk=pk, user=request.user))
    messages.success(request, "Token revoked: it no longer works.")
    return redirect("token-list")
