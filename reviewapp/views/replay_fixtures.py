"""Fixture sets in the browser: the list with the ways to make one, a set with its runs,
its replays and the form to start one, the regression suite, exports and imports."""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.paginator import Paginator
from django.http import FileResponse, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from reviewapp.accounts.roles import RUN_REPLAY
from reviewapp.engine import PolicyError
from reviewapp.forms.replay import (
    ExportForm,
    FileFixtureForm,
    FreezeForm,
    ReplayForm,
    SharedFixtureForm,
)
from reviewapp.models import FixtureRun, FixtureSet, PolicyVersion, ReplayJob, Ticket
from reviewapp.privacy.access import RawAccessRefused
from reviewapp.replay import fixtures
from reviewapp.replay.exports import Export, raw_export_check, redaction_keys
from reviewapp.replay.files import freeze_fixture_file, shared_fixtures
from reviewapp.replay.fixtures import FixtureError
from reviewapp.replay.impact import candidate_for
from reviewapp.replay.jobs import ReplayError, job_start
from reviewapp.review.queue import queue_filters
from reviewapp.views.replay import policy_choices

SETS_PER_PAGE = 25
RUNS_PER_PAGE = 50
JOBS_SHOWN = 20


@require_GET
def fixture_list(request: HttpRequest) -> HttpResponse:
    sets = fixtures.with_suite_state(FixtureSet.objects.select_related("created_by"))
    origin = request.GET.get("origin", "")
    if origin in FixtureSet.Origin.values:
        sets = sets.filter(origin=origin)
    elif origin != "all":
        # Snapshots of the open tickets are made for impact, many a day: listed on request.
        sets = sets.exclude(origin=FixtureSet.Origin.OPEN_TICKETS)
    page = Paginator(sets, SETS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "origin": origin,
        "origins": FixtureSet.Origin.choices,
        "query": f"origin={origin}" if origin else "",
        "freeze_form": FreezeForm(),
        "file_form": FileFixtureForm(auto_id="upload_%s"),
        "shared": shared_fixtures(),
        "can_run": request.user.has_perm(RUN_REPLAY),
    }
    return render(request, "replay/fixtures.html", context)


def _back(request: HttpRequest) -> HttpResponse:
    """Where a freeze that failed was asked from (this site only), else the list."""
    referer = request.headers.get("referer", "")
    host = request.get_host()
    if referer.startswith((f"http://{host}/", f"https://{host}/")):
        return redirect(referer)
    return redirect("replay-fixtures")


@require_POST
@permission_required(RUN_REPLAY, raise_exception=True)
def fixture_freeze(request: HttpRequest) -> HttpResponse:
    form = FreezeForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not frozen: say what to freeze (a ticket, a family, a version).")
        return _back(request)
    data = form.cleaned_data
    named = {"name": data["name"], "description": data["description"]}
    try:
        if data["source"] == "ticket":
            ticket = get_object_or_404(Ticket.objects.select_related("run"), pk=data["ticket"])
            made = fixtures.freeze_ticket(ticket, user=request.user, **named)
        elif data["source"] == "family":
            made = fixtures.freeze_family(data["family"], user=request.user, **named)
        elif data["source"] == "queue":
            filters = queue_filters(QueryDict(data["queue"].lstrip("?")))
            made = fixtures.freeze_queue(filters, request.user, **named)
        else:
            version = get_object_or_404(PolicyVersion, number=data["version"])
            made = fixtures.freeze_settled(version, user=request.user, **named)
    except FixtureError as exc:
        messages.error(request, f"Not frozen: {exc}.")
        return _back(request)
    messages.success(request, f"Frozen: {made.run_count:,} run(s) as “{made.name}”.")
    return redirect("replay-fixture", pk=made.pk)


@require_POST
@permission_required(RUN_REPLAY, raise_exception=True)
def fixture_upload(request: HttpRequest) -> HttpResponse:
    form = FileFixtureForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, "Not frozen: choose a file and name the fixture set.")
        return redirect("replay-fixtures")
    upload = form.cleaned_data["file"]
    with tempfile.TemporaryDirectory(dir=_upload_dir()) as folder:
        path = Path(folder) / "upload"
        with path.open("wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
        return _freeze_file(
            request,
            path,
            origin=FixtureSet.Origin.UPLOAD,
            label=upload.name[:200],
            name=form.cleaned_data["name"],
            description=form.cleaned_data["description"],
        )


def _upload_dir() -> Path:
    folder = Path(settings.UPLOAD_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@require_POST
@permission_required(RUN_REPLAY, raise_exception=True)
def fixture_shared(request: HttpRequest) -> HttpResponse:
    form = SharedFixtureForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not frozen: choose a shared fixture.")
        return redirect("replay-fixtures")
    shared = form.cleaned_data["shared"]
    return _freeze_file(
        request,
        Path(settings.REPLAY_SHARED_FIXTURES_DIR),
        origin=FixtureSet.Origin.SHARED,
        label=shared,
        name=form.cleaned_data["name"] or f"Shared fixture {shared}",
        description="",
    )


def _freeze_file(
    request: HttpRequest, path: Path, *, origin: str, label: str, name: str, description: str
) -> HttpResponse:
    try:
        made, golden = freeze_fixture_file(
            path, name=name, origin=origin, label=label, user=request.user, description=description
        )
    except (FixtureError, PolicyError, ValueError) as exc:
        messages.error(request, f"Not frozen: {exc}.")
        return redirect("replay-fixtures")
    note = f" ({golden.describe()})" if golden is not None else ""
    messages.success(request, f"Frozen: {made.run_count:,} run(s) as “{made.name}”{note}.")
    return redirect("replay-fixture", pk=made.pk)


@require_GET
def fixture_detail(request: HttpRequest, pk: int) -> HttpResponse:
    fixture_set = get_object_or_404(
        fixtures.with_suite_state(FixtureSet.objects.select_related("created_by")), pk=pk
    )
    runs = Paginator(
        FixtureRun.objects.filter(fixture_set=fixture_set)
        .select_related("run", "recorded_judgement")
        .order_by("id"),
        RUNS_PER_PAGE,
    ).get_page(request.GET.get("page"))
    jobs = ReplayJob.objects.filter(fixture_set=fixture_set).select_related(
        "candidate", "started_by"
    )
    choices = policy_choices()
    latest = next((int(value[1:]) for value, _ in choices if value.startswith("v")), 0)
    context = {
        "fixture_set": fixture_set,
        "page": runs,
        "jobs": jobs[:JOBS_SHOWN],
        "policy_choices": choices,
        "export_form": ExportForm(initial={"version": latest, "part": "bundle"}),
        "can_run": request.user.has_perm(RUN_REPLAY),
    }
    return render(request, "replay/fixture.html", context)


@require_POST
@permission_required(RUN_REPLAY, raise_exception=True)
def fixture_suite(request: HttpRequest, pk: int) -> HttpResponse:
    fixture_set = get_object_or_404(FixtureSet, pk=pk)
    into = request.POST.get("in_suite") == "1"
    fixtures.suite_mark(fixture_set, in_suite=into, user=request.user)
    messages.success(
        request,
        f"“{fixture_set.name}” is {'now in' if into else 'out of'} the policy's regression suite.",
    )
    return redirect("replay-fixture", pk=pk)


@require_POST
@permission_required(RUN_REPLAY, raise_exception=True)
def fixture_replay(request: HttpRequest, pk: int) -> HttpResponse:
    fixture_set = get_object_or_404(FixtureSet, pk=pk)
    form = ReplayForm(request.POST)
    try:
        if not form.is_valid():
            raise ReplayError("choose what to replay under")
        kind, number = form.choice()
        candidate = candidate_for(kind, number, user=request.user)
    except (ReplayError, PolicyError, ValueError) as exc:
        messages.error(request, f"Not started: {exc}.")
        return redirect("replay-fixture", pk=pk)
    job = job_start(fixture_set, candidate, user=request.user, reason="started by hand")
    return redirect("replay-job", pk=job.pk)


@require_GET
def fixture_export(request: HttpRequest, pk: int) -> HttpResponseBase:
    fixture_set = get_object_or_404(FixtureSet, pk=pk)
    form = ExportForm(request.GET)
    if not form.is_valid():
        messages.error(request, "Not exported: choose the version the expected verdicts are under.")
        return redirect("replay-fixture", pk=pk)
    data = form.cleaned_data
    try:
        raw_export_check(request.user, fixture_set, data["part"], data["reason"])
    except RawAccessRefused as refused:
        if refused.forbidden:
            return HttpResponse(f"Not exported: {refused}.", status=403, content_type="text/plain")
        messages.error(request, f"Not exported: {refused}.")
        return redirect("replay-fixture", pk=pk)
    try:
        export = Export(fixture_set, data["version"])
        export.redact = redaction_keys(data["redact"], export.policy)
        part = data["part"]
        if part == "policy":
            return JsonResponse(
                export.policy, json_dumps_params={"indent": 2, "ensure_ascii": False}
            )
        stem = export.stem
        if part == "bundle":
            return FileResponse(export.bundle(), as_attachment=True, filename=f"{stem}.zip")
        records = tempfile.TemporaryFile()  # noqa: SIM115 (FileResponse closes it)
        export.write_records(records)
        records.seek(0)
        if part == "records":
            return FileResponse(records, as_attachment=True, filename=f"{stem}.jsonl")
        expected = tempfile.TemporaryFile()  # noqa: SIM115 (FileResponse closes it)
        with records:
            export.write_expected(records, expected)
        expected.seek(0)
        return FileResponse(expected, as_attachment=True, filename=f"{stem}.expected.jsonl")
    except FixtureError as exc:
        messages.error(request, f"Not exported: {exc}.")
        return redirect("replay-fixture", pk=pk)
