"""Fast inserts of many new rows: COPY on PostgreSQL, bulk_create elsewhere.

Used for what ingestion writes by the hundred thousand (records, judgements, verdicts,
findings), where the ORM's per-value preparation costs more than the database's work."""

from __future__ import annotations

import json
from collections.abc import Sequence

from django.db import connection, models


def insert_rows(
    model: type[models.Model], rows: Sequence[models.Model], *, assign_ids: bool = False
) -> None:
    """Insert unsaved instances; with assign_ids, each instance gets its primary key."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        model.objects.bulk_create(rows, batch_size=500)
        return
    meta = model._meta
    if assign_ids:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                [meta.db_table, meta.pk.column, len(rows)],
            )
            for row, (new_id,) in zip(rows, cursor.fetchall(), strict=True):
                row.pk = new_id
    fields = [f for f in meta.concrete_fields if assign_ids or not f.primary_key]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(
            f"COPY {connection.ops.quote_name(meta.db_table)} ({columns}) FROM STDIN"
        ) as copy,
    ):
        for row in rows:
            copy.write_row([f.get_db_prep_save(f.pre_save(row, True), connection) for f in fields])


def insert_values(
    model: type[models.Model], attnames: Sequence[str], rows: Sequence[Sequence]
) -> None:
    """Insert plain value tuples (in `attnames` order) without building model instances,
    for the widest tables; JSON fields take Python values."""
    if not rows:
        return
    meta = model._meta
    fields = [next(f for f in meta.concrete_fields if f.attname == name) for name in attnames]
    if connection.vendor != "postgresql":
        model.objects.bulk_create(
            [model(**dict(zip(attnames, row, strict=True))) for row in rows], batch_size=500
        )
        return
    as_json = [isinstance(f, models.JSONField) for f in fields]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    statement = f"COPY {connection.ops.quote_name(meta.db_table)} ({columns}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row(
                [
                    json.dumps(v, ensure_ascii=False) if j else v
                    for v, j in zip(row, as_json, strict=True)
                ]
            )
