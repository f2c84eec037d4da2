"""Audited erasure: a value purged from everything stored, four eyes on it.

One person requests it (the value kept encrypted until done, its token shown); another
approves it (models.guards.erasure_guard: never its requester, a decision never changes);
then run_erasure replaces the value by its token in every table of the app, deletes its
protected copies, rewrites the kept uploads that hold it and clears the cache. The
append-only guard lets exactly this through: an UPDATE in a transaction that names an
approved request (guards.ERASING). The report (what was touched) is kept on the request
and summed in one audit event, which names who asked and who approved and carries the
token, never the value."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from cryptography.fernet import Fernet
from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.utils import timezone

from reviewapp import durable
from reviewapp.accounts.audit import audit_record
from reviewapp.celery import Tasks
from reviewapp.durable import Durable, Send
from reviewapp.infra.locks import Space, locks_held, try_lock, unlock
from reviewapp.models import ErasureRequest
from reviewapp.models.guards import ERASURE_SETTING
from reviewapp.privacy import purge
from reviewapp.privacy.tokens import token_of

State = ErasureRequest.State
log = logging.getLogger(__name__)


def _erasures_due() -> list[Send]:
    """Approved erasures no worker is running (none holds its lock) ERASURE_REQUEUE_SECONDS
    after their approval: the message was lost (the broker down at approval) or its worker
    died. Running one again finds what is left."""
    moment = timezone.now() - timedelta(seconds=settings.ERASURE_REQUEUE_SECONDS)
    left = ErasureRequest.objects.filter(state=State.APPROVED, decided_at__lt=moment)
    held = locks_held(Space.ERASURE)
    return [Send(Tasks.ERASE, (pk,)) for pk in left.values_list("pk", flat=True) if pk not in held]


# A durable kind of its own (reviewapp.durable): the reconciler sends again what is due.
ERASURES = Durable(
    name="erasure",
    model=ErasureRequest,
    task=Tasks.ERASE,
    lock=Space.ERASURE,
    pulse=None,
    born=None,
    state=None,
    due=_erasures_due,
)


class ErasureError(Exception):
    """A request or decision that cannot be made (said in words for the person)."""


def _fernet() -> Fernet:
    return Fernet(settings.PROTECTED_VALUES_KEY)


def erasure_request(value: str, *, user: Any, reason: str) -> ErasureRequest:
    """Ask for the value's erasure: a second person must approve it."""
    if not value:
        raise ErasureError("say which value to erase")
    if not reason.strip():
        raise ErasureError("say why the value must be erased")
    token = token_of(value)
    if any(form in reason for form in purge.spellings(value)):
        raise ErasureError("the reason must not hold the value (it is kept)")
    with transaction.atomic():
        request = ErasureRequest.objects.create(
            requested_by=user,
            requested_at=timezone.now(),
            reason=reason.strip(),
            value_encrypted=_fernet().encrypt(value.encode()),
            token=token,
        )
        audit_record(
            actor=user, verb="erasure.requested", target=f"erasure #{request.pk}", token=token
        )
    return request


def erasure_decide(
    request_id: int, *, user: Any, approve: bool, send: bool = True
) -> ErasureRequest:
    """Approve (and, with `send`, start in a worker once committed) or refuse a request:
    someone other than its requester, once."""
    with transaction.atomic():
        request = ErasureRequest.objects.select_for_update().get(pk=request_id)
        if request.state != State.REQUESTED:
            raise ErasureError(f"erasure #{request.pk} is {request.state} already")
        if request.requested_by_id == user.pk:
            raise ErasureError("a second person must decide: you requested this erasure")
        request.state = State.APPROVED if approve else State.REFUSED
        request.decided_by = user
        request.decided_at = timezone.now()
        request.save(update_fields=["state", "decided_by", "decided_at"])
        audit_record(
            actor=user,
            verb="erasure.approved" if approve else "erasure.refused",
            target=f"erasure #{request.pk}",
            token=request.token,
            requested_by=request.requested_by.get_username(),
        )
        if approve and send:
            durable.send(Tasks.ERASE, request.pk)
    return request


@contextmanager
def _erasing(request_id: int) -> Iterator[None]:
    """A transaction in which the guards let this approved request's changes through."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config(%s, %s, true)", [ERASURE_SETTING, str(request_id)])
        yield


def run_erasure(request_id: int) -> dict[str, Any]:
    """Erase an approved request's value everywhere; its report. Running it again (after
    an interruption) finds what is left; a done request is not run again. One worker at a
    time (its lock): another finds it held and leaves it (an empty report)."""
    if not try_lock(Space.ERASURE, request_id):
        log.info("erasure #%s is being run elsewhere; left to that worker", request_id)
        return {}
    try:
        return _erasure_run(request_id)
    finally:
        unlock(Space.ERASURE, request_id)


def _erasure_run(request_id: int) -> dict[str, Any]:
    request = ErasureRequest.objects.select_related("requested_by", "decided_by").get(pk=request_id)
    if request.state == State.DONE:
        return request.report
    if request.state != State.APPROVED:
        raise ErasureError(f"erasure #{request.pk} is {request.state}, not approved")
    value = _fernet().decrypt(bytes(request.value_encrypted)).decode()
    tables = purge.tables_rewrite(value, request.token, lambda: _erasing(request_id))
    with _erasing(request_id):
        protected = purge.protected_values_delete(value)
    files = purge.kept_files_rewrite(value, request.token)
    audit_holding = purge.audit_events_holding(value)
    cache.clear()
    report = {
        "tables": tables,
        "rows": sum(rows for _, _, rows in tables),
        "protected_values_deleted": protected,
        "files": files,
        "cache_cleared": True,
        "audit_events_holding": audit_holding,
    }
    with transaction.atomic():
        finished = ErasureRequest.objects.filter(pk=request.pk, state=State.APPROVED).update(
            state=State.DONE, finished_at=timezone.now(), value_encrypted=b"", report=report
        )
        if not finished:  # another worker ran it to the end meanwhile (a task sent twice)
            return ErasureRequest.objects.get(pk=request.pk).report
        audit_record(
            actor=request.decided_by,
            verb="erasure.done",
            target=f"erasure #{request.pk}",
            token=request.token,
            requested_by=request.requested_by.get_username(),
            approved_by=request.decided_by.get_username() if request.decided_by else "",
            rows=report["rows"],
            columns=len(tables),
            protected_values_deleted=protected,
            files=len(files),
            audit_events_holding=audit_holding,
        )
    return report
