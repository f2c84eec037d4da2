"""What waits for a worker: the bytes of an upload or a posted body, kept in the uploads
storage (settings.STORAGES["uploads"]) under the name its batch holds
(IngestBatch.stored_path), where every worker reads them, on this machine or another. By
default the storage is the folder UPLOAD_DIR (one machine, or a volume the workers share);
with UPLOAD_S3_BUCKET, a bucket of an S3-compatible object store (settings). A worker reads
a kept body as a stream, never whole.

A batch whose stored_path is an absolute path names a file of the machine instead: a file
named on the command line (the user's own, read where it lies), or a body kept in
UPLOAD_DIR by a version before the uploads storage."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, cast

from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages

from reviewapp.ingest.streams import Kept

UPLOADS = "uploads"


def uploads() -> Storage:
    """The uploads storage (looked up each time: a test may change STORAGES)."""
    return storages[UPLOADS]


class _Received(File):
    """A body received into a file here: the folder storage moves it instead of copying."""

    def temporary_file_path(self) -> str:
        return str(self.name)


def kept_store(kept: Kept, *, suffix: str = "") -> str:
    """Put a body received here (streams.keep_stream) into the uploads storage under a new
    name ending in `suffix`, and return the name; its file here is gone after."""
    try:
        with kept.path.open("rb") as stream:
            received = _Received(stream, name=str(kept.path))
            return uploads().save(uuid.uuid4().hex + suffix, received)
    finally:
        kept.path.unlink(missing_ok=True)


def kept_bytes_store(content: bytes) -> str:
    """Put bytes made here into the uploads storage under a new name, and return it."""
    return uploads().save(uuid.uuid4().hex, ContentFile(content))


@contextmanager
def kept_open(stored: str) -> Iterator[BinaryIO]:
    """A batch's file (its stored_path) open for reading, as a seekable binary stream."""
    if os.path.isabs(stored):
        with open(stored, "rb") as stream:
            yield stream
        return
    with uploads().open(stored, "rb") as file:
        yield cast(BinaryIO, file.file)


def kept_exists(stored: str) -> bool:
    if not stored:
        return False
    if os.path.isabs(stored):
        return Path(stored).exists()
    return uploads().exists(stored)


def kept_delete(stored: str) -> None:
    """Delete a kept body (nothing when it is gone already)."""
    if not stored:
        return
    if os.path.isabs(stored):
        Path(stored).unlink(missing_ok=True)
    else:
        uploads().delete(stored)
