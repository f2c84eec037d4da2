"""Uploaded files are refused as they arrive once past INGEST_MAX_BYTES, not after Django
has spooled them whole to a temporary file."""

from __future__ import annotations

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.http import HttpRequest


class CappedUploadHandler(FileUploadHandler):
    """First in FILE_UPLOAD_HANDLERS: passes each file's data on to the next handlers until
    the file passes the limit, then skips the rest of it and notes its name on the request
    (see refused_uploads)."""

    def new_file(self, *args, **kwargs) -> None:
        super().new_file(*args, **kwargs)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > settings.INGEST_MAX_BYTES:
            request = self.request
            assert request is not None  # an upload handler always has its request
            request._refused_uploads = [*refused_uploads(request), self.file_name]  # type: ignore[attr-defined]
            raise SkipFile
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handlers make the file


def refused_uploads(request: HttpRequest) -> list[str]:
    """Names of the files this request's upload skipped for their size (read its FILES
    first: they are parsed when first asked for)."""
    return getattr(request, "_refused_uploads", [])
