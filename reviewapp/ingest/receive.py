"""Receiving deliveries through the browser and the API: each is kept, becomes a batch and
is ingested at once (a small plain upload) or by a worker. An API client that sends the
same body again under its Idempotency-Key gets the first answer, and a failed batch is
tried again."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction

from reviewapp.infra.storable_text import NUL, NUL_REFUSAL
from reviewapp.ingest.batches import (
    BatchNotRetryable,
    IngestSummary,
    create_batch,
    retry_batch,
    send_to_worker,
)
from reviewapp.ingest.files import is_gzip
from reviewapp.ingest.kept import kept_delete, kept_store
from reviewapp.ingest.pipeline import ingest_batch
from reviewapp.ingest.sniff import file_binary_kind, refusal
from reviewapp.ingest.streams import Kept, Readable, TooLarge, keep_stream
from reviewapp.models import ApiToken, IngestBatch

MAX_IDEMPOTENCY_KEY = 200
MAX_FILE_NAME = IngestBatch._meta.get_field("file_name").max_length or 255


@dataclass(frozen=True)
class Received:
    """What became of one delivery: its batch, and its summary when it was ingested while
    the sender waited (None: queued for a worker)."""

    batch: IngestBatch
    summary: IngestSummary | None


class DeliveryRefused(Exception):
    """A delivery not taken, with the HTTP status that says why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def upload_receive(upload: Readable, *, name: str, user) -> Received:
    """Keep an uploaded file; ingest it now when it is small and plain, else queue it
    (a gzip's size says little of what it holds). DeliveryRefused (nothing kept) for a
    binary file."""
    kept = keep_stream(upload)
    _refuse_binary(kept)
    inline = kept.size <= settings.INGEST_INLINE_MAX_BYTES and not is_gzip(kept.path)
    stored = kept_store(kept)
    try:
        batch = create_batch(
            channel=IngestBatch.Channel.UPLOAD,
            path=stored,
            file_name=name,
            digest=(kept.sha256, kept.size),
            user=user,
        )
    except BaseException:
        kept_delete(stored)
        raise
    if inline:
        return Received(batch, ingest_batch(batch))
    send_to_worker(batch)
    return Received(batch, None)


def _refuse_binary(kept: Kept) -> None:
    kind = file_binary_kind(kept.path)
    if kind is not None:
        kept.path.unlink(missing_ok=True)
        raise DeliveryRefused(415, refusal(kind))


def file_name_header(value: str) -> str | None:
    """The X-File-Name header as the client wrote it, or None. WSGI hands header bytes over
    as Latin-1; a client sending UTF-8 (a file name with "ä", say) meant UTF-8. Longer than
    the API document allows is refused (400), counted before control characters are
    dropped, so that what the client sent decides."""
    with suppress(UnicodeEncodeError, UnicodeDecodeError):
        value = value.encode("latin-1").decode("utf-8")
    if len(value) > MAX_FILE_NAME:
        raise DeliveryRefused(400, f"X-File-Name is longer than {MAX_FILE_NAME} characters")
    return "".join(char for char in value if char.isprintable()).strip() or None


def api_body_receive(
    body: Readable,
    *,
    token: ApiToken,
    declared_length: str,
    idempotency_key: str | None,
    file_name: str | None,
) -> Received:
    """Keep a posted body and queue it; DeliveryRefused (nothing kept) when it is too
    large, empty or binary, its Idempotency-Key too long or holding a NUL, or used with
    another body."""
    limit = settings.INGEST_MAX_BYTES
    too_large = DeliveryRefused(413, f"body is over the {limit:,}-byte limit")
    if declared_length.isascii() and declared_length.isdecimal() and int(declared_length) > limit:
        raise too_large
    if idempotency_key is not None:
        if len(idempotency_key) > MAX_IDEMPOTENCY_KEY:
            raise DeliveryRefused(
                400, f"Idempotency-Key is longer than {MAX_IDEMPOTENCY_KEY} characters"
            )
        if NUL in idempotency_key:
            raise DeliveryRefused(400, f"Idempotency-Key {NUL_REFUSAL}")
    try:
        kept = keep_stream(body, limit=limit)
    except TooLarge:
        raise too_large from None
    if kept.size == 0:
        kept.path.unlink(missing_ok=True)
        raise DeliveryRefused(400, "empty body: send JSON Lines (optionally gzip-compressed)")
    _refuse_binary(kept)
    stored = kept_store(kept)
    try:
        with transaction.atomic():
            batch = create_batch(
                channel=IngestBatch.Channel.API,
                path=stored,
                file_name=file_name or f"api-{kept.sha256[:12]}.jsonl",
                digest=(kept.sha256, kept.size),
                user=token.user,
                token=token,
                idempotency_key=idempotency_key,
            )
            send_to_worker(batch)
    except IntegrityError:
        earlier = IngestBatch.objects.get(api_token=token, idempotency_key=idempotency_key)
        if earlier.content_sha256 != kept.sha256:
            kept_delete(stored)
            raise DeliveryRefused(
                422, "this Idempotency-Key was used with a different body"
            ) from None
        if earlier.state == IngestBatch.State.FAILED:
            with suppress(BatchNotRetryable):
                retry_batch(earlier, body=stored)
        earlier.refresh_from_db()
        if earlier.stored_path != stored:  # else it is the batch's body now
            kept_delete(stored)
        return Received(earlier, None)
    except BaseException:
        kept_delete(stored)
        raise
    return Received(batch, None)
