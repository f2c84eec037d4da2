"""The one change of a line or record the database lets through (models/guards.py:
TRACE_LINE_TOMBSTONE, TRACE_RECORD_TOMBSTONE): a line's raw bytes replaced, once, by a
tombstone holding their true hash and size, and an expired line's converted records' data
set to NULL. Every other UPDATE is refused, by the app's role (raw SQL, as an attacker
holding DATABASE_URL would send it) and by the owner of the tables alike."""

from __future__ import annotations

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction

from reviewapp.models import TraceLine, TraceRecord
from tests.privacy.traces import deliver, old_content
from tests.roles import owner_conninfo, separate

pytestmark = pytest.mark.django_db

TOMBSTONE = (
    "UPDATE reviewapp_traceline SET expired_at = now(), raw_sha256 = {sha256}, "
    "raw_size = octet_length(raw), raw = ''::bytea WHERE id = %s"
)
TRUE_HASH = "encode(sha256(raw), 'hex')"


def refused(statement: str, params: list, *, match: str = "append-only") -> None:
    with (
        pytest.raises(DatabaseError, match=match),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(statement, params)


def run(statement: str, params: list) -> int:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount


@pytest.fixture
def lines(tmp_path) -> dict[str, int]:
    """A native line and an OTLP line (its records hold their own data), by kind."""
    deliver(tmp_path, "old.jsonl", old_content())
    external = TraceRecord.objects.filter(data__isnull=False).values_list("line_id", flat=True)
    native = TraceLine.objects.exclude(pk__in=external).values_list("pk", flat=True)
    return {"native": native.first(), "external": external.first()}


def test_the_app_role_may_write_the_tombstone_and_nothing_else(lines):
    native = lines["native"]
    # Other bytes, an empty line with no tombstone, a tombstone with a forged hash or size.
    refused("UPDATE reviewapp_traceline SET raw = 'x'::bytea WHERE id = %s", [native])
    refused("UPDATE reviewapp_traceline SET raw = ''::bytea WHERE id = %s", [native])
    refused(TOMBSTONE.format(sha256="repeat('0', 64)"), [native])
    refused(
        "UPDATE reviewapp_traceline SET expired_at = now(), raw_sha256 = encode(sha256(raw), "
        "'hex'), raw_size = 1, raw = ''::bytea WHERE id = %s",
        [native],
    )
    # Keeping the bytes while claiming they expired.
    refused(
        "UPDATE reviewapp_traceline SET expired_at = now(), raw_sha256 = encode(sha256(raw), "
        "'hex'), raw_size = octet_length(raw) WHERE id = %s",
        [native],
    )
    # Columns outside the tombstone: not even the privilege.
    for column, value in (("identity", "gen_random_uuid()"), ("line_number", "line_number + 1")):
        refused(
            f"UPDATE reviewapp_traceline SET {column} = {value} WHERE id = %s",
            [native],
            match="append-only|permission denied",
        )
    refused("DELETE FROM reviewapp_traceline WHERE id = %s", [native], match="permission denied")

    assert run(TOMBSTONE.format(sha256=TRUE_HASH), [native]) == 1
    line = TraceLine.objects.get(pk=native)
    assert bytes(line.raw) == b"" and line.raw_size and len(line.raw_sha256) == 64

    # Once a tombstone, always one: no un-expiring, no new bytes, no second tombstone.
    refused("UPDATE reviewapp_traceline SET expired_at = NULL WHERE id = %s", [native])
    refused(
        "UPDATE reviewapp_traceline SET expired_at = NULL, raw_sha256 = NULL, raw_size = NULL, "
        "raw = 'x'::bytea WHERE id = %s",
        [native],
    )
    refused("UPDATE reviewapp_traceline SET raw_sha256 = repeat('f', 64) WHERE id = %s", [native])
    refused("UPDATE reviewapp_traceline SET expired_at = now() WHERE id = %s", [native])


def test_a_records_data_goes_only_once_its_line_is_a_tombstone(lines):
    external = lines["external"]
    record = TraceRecord.objects.filter(line_id=external, data__isnull=False).first()
    forget = "UPDATE reviewapp_tracerecord SET data = NULL WHERE id = %s"
    refused(forget, [record.pk])
    refused("UPDATE reviewapp_tracerecord SET data = '{}'::jsonb WHERE id = %s", [record.pk])
    refused(
        "UPDATE reviewapp_tracerecord SET key = 'other' WHERE id = %s",
        [record.pk],
        match="append-only|permission denied",
    )

    run(TOMBSTONE.format(sha256=TRUE_HASH), [external])
    refused("UPDATE reviewapp_tracerecord SET data = '{}'::jsonb WHERE id = %s", [record.pk])
    assert run(forget, [record.pk]) == 1
    # Once NULL, it stays so.
    refused("UPDATE reviewapp_tracerecord SET data = '{}'::jsonb WHERE id = %s", [record.pk])
    assert TraceRecord.objects.get(pk=record.pk).data is None


@pytest.mark.skipif(not separate(), reason="needs the two roles scripts/test makes")
@pytest.mark.django_db(transaction=True)
def test_the_owner_too_may_change_nothing_but_the_tombstone(lines):
    """The owner has every privilege: the trigger alone refuses a tombstone that changes
    anything else of the line or record."""
    native, external = lines["native"], lines["external"]
    with psycopg.connect(owner_conninfo(connection)) as owner:
        for change in ("identity = gen_random_uuid()", "line_number = line_number + 1"):
            with (
                pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"),
                owner.transaction(),
            ):
                owner.execute(
                    TOMBSTONE.format(sha256=TRUE_HASH).replace("WHERE", f", {change} WHERE"),
                    [native],
                )
        owner.execute(TOMBSTONE.format(sha256=TRUE_HASH), [external])
        with (
            pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"),
            owner.transaction(),
        ):
            owner.execute(
                "UPDATE reviewapp_tracerecord SET data = NULL, key = 'other' WHERE line_id = %s "
                "AND data IS NOT NULL",
                [external],
            )
    assert TraceLine.objects.get(pk=native).expired_at is None
    assert TraceRecord.objects.filter(line_id=external, data__isnull=False).exists()
