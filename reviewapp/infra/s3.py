"""An S3-compatible bucket as a Django storage whose files are read as a stream.

django-storages' S3Storage downloads a whole object before the first byte of it is read
(into memory, unless AWS_S3_MAX_MEMORY_SIZE spools it to disk). A body kept for a worker
may be 512 MiB, and each part of a batch reads all of it: here an object is read from
where its reader stands, by ranged GETs, and held no more than a buffer at a time.
Everything else (saving by multipart upload, deleting, existing) is S3Storage's."""

from __future__ import annotations

import io
from typing import Any

from botocore.exceptions import ClientError
from django.core.files import File
from storages.backends.s3 import S3Storage
from storages.utils import clean_name

# What one read of the object's body asks of the connection at most.
READ_BUFFER_BYTES = 1 << 20


class StreamingS3Storage(S3Storage):
    """S3Storage whose files opened for reading stream (seekable: a seek starts a new
    ranged GET from there)."""

    def _open(self, name: str, mode: str = "rb") -> Any:
        if "w" in mode or "a" in mode or "+" in mode:
            return super()._open(name, mode)
        key = self._normalize_name(clean_name(name))
        try:
            reader = ObjectReader(self.bucket.Object(key))
        except ClientError as err:
            if err.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
                raise FileNotFoundError(f"File does not exist: {name}") from err
            raise
        stream: Any = io.BufferedReader(reader, READ_BUFFER_BYTES)
        if "b" not in mode:
            stream = io.TextIOWrapper(stream, encoding="utf-8")
        return File(stream, name)


class ObjectReader(io.RawIOBase):
    """One S3 object as a raw binary stream: a GET from the current position, read as
    far as it is asked, and a new one after a seek."""

    def __init__(self, obj: Any):
        self._obj, self._position = obj, 0
        self._body: Any = None  # the body of the GET being read
        obj.load()  # a HEAD: its size, and a missing object fails here
        self._size: int = obj.content_length

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        target = base + offset
        if target < 0:
            raise OSError(f"negative seek position {target}")
        if target != self._position:
            self._drop_body()
            self._position = target
        return self._position

    def readinto(self, buffer: Any) -> int:
        if self._position >= self._size or not len(buffer):
            return 0
        if self._body is None:
            self._body = self._obj.get(Range=f"bytes={self._position}-")["Body"]
        data = self._body.read(len(buffer))
        if not data:
            raise OSError(
                f"{self._obj.key}: the object ended at byte {self._position:,} of {self._size:,}"
            )
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)

    def close(self) -> None:
        self._drop_body()
        super().close()

    def _drop_body(self) -> None:
        if self._body is not None:
            self._body.close()
            self._body = None
