"""Python and PostgreSQL at the same time: while one chunk's statements run in the
database (COPY, the checks, the commit), the next chunk is read and decoded.

The chunk's database work runs in one writer thread on the ingest's own connection (the
same transaction state, the same advisory lock): the thread that reads and decodes does
not touch the database meanwhile. Waiting on PostgreSQL releases the GIL, so decoding
goes on during it. Chunks are written one at a time and in order, and at most one chunk
waits decoded: memory stays that of two chunks. An error of the writer is raised in the
reading thread, at its next hand-over or at the end."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections


class ChunkWriter:
    def __init__(self) -> None:
        self._pending: Future[Any] | None = None
        self._results: list[Any] = []
        shared = connections[DEFAULT_DB_ALIAS]
        shared.inc_thread_sharing()
        self._shared = shared
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix="ingest-writer",
            initializer=_use_connection,
            initargs=(shared,),
        )

    def submit(self, work: Callable[..., Any], *args: Any) -> None:
        """Write one chunk: after the chunk before it is written, while the caller goes on."""
        self.wait()
        if self._pool is None:
            raise RuntimeError("the chunk writer is closed")
        self._pending = self._pool.submit(contextvars.copy_context().run, work, *args)

    def wait(self) -> None:
        """Until the chunk handed over last is written; its error, if it failed."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._results.append(pending.result())

    def results(self) -> list[Any]:
        self.wait()
        return self._results

    def close(self) -> None:
        if self._pool is None:
            return
        try:
            if self._pending is not None:
                # Leaving on an error: let the chunk in flight end (commit or roll back)
                # before the connection is used again; its own error is the lesser one.
                self._pending.exception()
                self._pending = None
        finally:
            self._pool.shutdown(wait=True)
            self._pool = None
            self._shared.dec_thread_sharing()

    def __enter__(self) -> ChunkWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _use_connection(shared: Any) -> None:
    """In the writer thread: the ingest's connection, not one of the thread's own."""
    connections[DEFAULT_DB_ALIAS] = shared
