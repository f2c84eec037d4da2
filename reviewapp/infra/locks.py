"""PostgreSQL advisory locks held by a worker's connection for as long as it works.

A worker that dies (SIGKILL, a lost machine, the database restarted under it) loses its
connection, and PostgreSQL lets go of its locks at once. So the database itself knows who
is still working on what: `locks_held` asks it, and a reconciler can tell work whose
worker died from work that is merely slow, without waiting for a long lease to run out."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from django.db import connection

# The first key of every advisory lock on a batch (the second is its id). A part of a
# batch is locked as (minus the batch's id, the part's index).
BATCH_LOCK_SPACE = 0x1B47C4


@contextmanager
def advisory_lock(first: int, second: int, *, wait: bool = False) -> Iterator[bool]:
    """The advisory lock (first, second) on this connection: taken if free, or, with
    `wait`, once it is."""
    with connection.cursor() as cursor:
        if wait:
            cursor.execute("SELECT pg_advisory_lock(%s, %s), true", [first, second])
        else:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [first, second])
        taken = cursor.fetchone()[-1]
    try:
        yield taken
    finally:
        if taken:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [first, second])


def locks_held(first_keys: Iterable[int]) -> set[tuple[int, int]]:
    """The (first, second) advisory locks some session of this database holds now, among
    those whose first key is one of `first_keys`."""
    # pg_locks shows a two-key lock's keys as oids (unsigned): map them back to int4.
    keys = [key & 0xFFFFFFFF for key in first_keys]
    if not keys:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT classid::bigint, objid::bigint FROM pg_locks "
            "WHERE locktype = 'advisory' AND objsubid = 2 AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid::bigint = ANY(%s)",
            [keys],
        )
        return {(_signed(first), _signed(second)) for first, second in cursor.fetchall()}


def _signed(oid: int) -> int:
    return oid - (1 << 32) if oid >= 1 << 31 else oid
