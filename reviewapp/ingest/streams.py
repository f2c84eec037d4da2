"""Streams to files: an uploaded file or an API body is received into a file of this
machine's upload folder and hashed on the way, in one pass and never past its limit (what
waits for a worker then goes to the uploads storage: ingest.kept); a file named on the
command line is hashed where it lies."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from django.conf import settings


class Readable(Protocol):
    def read(self, size: int = ..., /) -> bytes: ...


class TooLarge(Exception):
    """A stream past its byte limit; nothing of it is kept."""


@dataclass(frozen=True)
class Kept:
    path: Path
    sha256: str
    size: int


def receiving_dir() -> Path:
    """Where this process receives a body: in the upload folder, so that the uploads
    storage's folder (by default that folder) takes it by renaming it."""
    path = Path(settings.UPLOAD_DIR) / "receiving"
    path.mkdir(parents=True, exist_ok=True)
    return path


def keep_stream(source: Readable, *, limit: int | None = None) -> Kept:
    """Copy a stream into a file of this machine's upload folder, hashing it; TooLarge
    past `limit` bytes."""
    target = receiving_dir() / uuid.uuid4().hex
    try:
        with target.open("wb") as out:
            sha256, size = _hashed(source, out, limit)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return Kept(target, sha256, size)


def file_digest(path: Path) -> tuple[str, int]:
    """A file's SHA-256 and size, read where it lies."""
    with path.open("rb") as stream:
        return _hashed(stream, None, None)


def _hashed(source: Readable, sink, limit: int | None) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    while block := source.read(1 << 20):
        size += len(block)
        if limit is not None and size > limit:
            raise TooLarge(f"over the {limit:,}-byte limit")
        digest.update(block)
        if sink is not None:
            sink.write(block)
    return digest.hexdigest(), size
