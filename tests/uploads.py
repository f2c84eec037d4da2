"""The uploads storage in tests: where it is, what it holds, a batch's kept body."""

from __future__ import annotations

from pathlib import Path

from reviewapp.ingest.kept import kept_exists, kept_open
from reviewapp.models import IngestBatch


def uploads_in(settings, folder: Path) -> Path:
    """Receive bodies into `folder` and keep them there for workers (the folder storage),
    for the rest of the test (`settings`: pytest-django's fixture)."""
    settings.UPLOAD_DIR = folder
    settings.STORAGES = {
        **settings.STORAGES,
        "uploads": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(folder)},
        },
    }
    return folder


def files_under(folder: Path) -> set[Path]:
    """Every file in `folder` and below: what the upload folder holds, received or kept."""
    return {path for path in Path(folder).rglob("*") if path.is_file()}


def kept_body(batch: IngestBatch) -> bytes:
    with kept_open(batch.stored_path) as stream:
        return stream.read()


def is_kept(batch: IngestBatch) -> bool:
    return kept_exists(batch.stored_path)
