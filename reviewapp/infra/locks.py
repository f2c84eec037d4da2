"""PostgreSQL advisory locks: every one the app takes is taken here.

Two kinds:
- A unit of durable work (reviewapp.durable) is locked as (its kind's space, its id) by
  the connection of the worker that works on it, for as long as it does (a session lock).
  A worker that dies (SIGKILL, a lost machine, the database restarted under it) loses its
  connection, and PostgreSQL lets go of its locks at once. So the database itself knows
  who is still working on what: `locks_held` asks it, and the reconciler tells work whose
  worker died from work that is merely slow, without waiting for a long lease to run out.
- One thing done at a time across processes within a transaction (publishing a version,
  folding the kept counts, refreshing the tallies): a named lock let go when the
  transaction ends (`transaction_lock`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum

from django.db import DatabaseError, connection


class Space(IntEnum):
    """The first key of a unit's lock, one per kind of durable work; its id is the second."""

    BATCH = 0x1B47C4
    PART = 0x1B47C5
    REPLAY_ITEM = 0x1B47C6
    LABELLING = 0x1B47C7
    BACKFILL = 0x5AD0
    ERASURE = 0xE2A5E
    ALERT_DELIVERY = 0xA1E27


def try_lock(space: Space, key: int) -> bool:
    """Take the lock (space, key) for this connection if it is free; whether it was.
    Held until `unlock` or the connection's end (a transaction's end does not free it)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [int(space), key])
        return bool(cursor.fetchone()[0])


def unlock(space: Space, key: int) -> None:
    """Let go of a lock this connection took. A connection that died has let go already."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [int(space), key])
    except DatabaseError:
        if connection.is_usable():
            raise


@contextmanager
def advisory_lock(space: Space, key: int, *, wait: bool = False) -> Iterator[bool]:
    """The lock (space, key) for this connection inside: taken if free, or, with `wait`,
    once it is."""
    if wait:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", [int(space), key])
        taken = True
    else:
        taken = try_lock(space, key)
    try:
        yield taken
    finally:
        if taken:
            unlock(space, key)


def locks_held(space: Space) -> set[int]:
    """The keys of the locks of `space` that some session of this database holds now."""
    with connection.cursor() as cursor:
        # pg_locks shows a two-key lock's keys as oids (unsigned): map them back to int4.
        cursor.execute(
            "SELECT objid::bigint FROM pg_locks "
            "WHERE locktype = 'advisory' AND objsubid = 2 AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid::bigint = %s",
            [int(space) & 0xFFFFFFFF],
        )
        return {_signed(key) for (key,) in cursor.fetchall()}


def transaction_lock(name: str, *, wait: bool = True) -> bool:
    """The lock named `name` for the current transaction (let go when it ends): taken once
    free, or, without `wait`, only if free; whether it was taken."""
    with connection.cursor() as cursor:
        if wait:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s)), true", [name])
        else:
            cursor.execute("SELECT pg_try_advisory_xact_lock(hashtext(%s))", [name])
        return bool(cursor.fetchone()[-1])


def _signed(oid: int) -> int:
    return oid - (1 << 32) if oid >= 1 << 31 else oid
