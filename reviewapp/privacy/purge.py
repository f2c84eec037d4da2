"""Where a value is stored, and its replacement by its token: every column of the app's
tables that can hold text (text, varchar, json, jsonb, bytea; found in the catalog, so that
a new table cannot be forgotten), the protected copies, and the kept bodies of uploads.

Each table is rewritten in ranges of its primary key, one transaction per range, so that
a large table is never one huge transaction; each statement changes only rows that still
hold the value, so that running again finds nothing left (an interrupted erasure is
simply run again)."""

from __future__ import annotations

import gzip
import json
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import IO, Any, cast

from django.core.files import File
from django.core.files.storage import storages
from django.db import connection

from reviewapp.models import ProtectedValue
from reviewapp.privacy.tokens import CANONICAL, token_of

# Not rewritten: the requests themselves (their token shows which value went, the value
# is emptied when done), and the audit trail and its head, hash-chained and never holding
# a trace's values (docs/security.md: Erasure).
NOT_SEARCHED = {"reviewapp_erasurerequest", "reviewapp_auditevent", "reviewapp_auditchain"}
TEXT_TYPES = ("text", "character varying", "json", "jsonb", "bytea")
RANGE = 20_000
UPLOADS = "uploads"  # ingest/kept.py's storage (a layer above: named, not imported)
GZIP_MAGIC = b"\x1f\x8b"


def spellings(value: str) -> list[str]:
    """The value as text may hold it: itself, and escaped as in JSON (non-ASCII kept, as
    PostgreSQL writes jsonb, or escaped, as json.dumps writes it by default)."""
    forms = [value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1]]
    return list(dict.fromkeys(forms))


@dataclass(frozen=True)
class Column:
    table: str
    name: str
    type: str


def value_columns() -> list[Column]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
            "JOIN information_schema.tables t ON t.table_schema = c.table_schema "
            "AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE' "
            "WHERE c.table_schema = current_schema() AND c.table_name LIKE 'reviewapp\\_%%' "
            "AND c.data_type = ANY(%s) ORDER BY 1, 2",
            [list(TEXT_TYPES)],
        )
        found = [Column(*row) for row in cursor.fetchall()]
    return [column for column in found if column.table not in NOT_SEARCHED]


def _has_id(table: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE "
            "table_schema = current_schema() AND table_name = %s AND column_name = 'id')",
            [table],
        )
        return bool(cursor.fetchone()[0])


def id_ranges(table: str) -> Iterator[tuple[int, int] | None]:
    """[low, high) ranges of the table's ids (None: the whole table, which has no id)."""
    if not _has_id(table):
        yield None
        return
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT min(id), max(id) FROM "{table}"')  # noqa: S608 (a catalog name)
        low, high = cursor.fetchone()
    if low is None:
        return
    for start in range(low, high + 1, RANGE):
        yield start, start + RANGE


def _column_rewrite(column: Column, value: str, token: str, where_range: str, args: list) -> int:
    quoted = f'"{column.name}"'
    table = f'"{column.table}"'
    if column.type == "bytea":
        return _bytea_rewrite(column, value, token, where_range, args)
    if column.type in ("json", "jsonb"):
        forms = [json.dumps(value, ensure_ascii=False)[1:-1]]
        as_text = f"{quoted}::text"
    else:
        forms = spellings(value)
        as_text = quoted
    replaced = as_text
    for _ in forms:
        replaced = f"replace({replaced}, %s, %s)"
    if column.type in ("json", "jsonb"):
        replaced = f"({replaced})::{column.type}"
    holds = " OR ".join(f"position(%s in {as_text}) > 0" for _ in forms)
    params: list[Any] = [p for form in forms for p in (form, token)] + args + forms
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {quoted} = {replaced} WHERE {where_range} ({holds})",  # noqa: S608
            params,
        )
        return cursor.rowcount


def _bytea_rewrite(column: Column, value: str, token: str, where_range: str, args: list) -> int:
    # In Python: a line need not be valid UTF-8, which convert_from would refuse.
    forms = [form.encode() for form in spellings(value)]
    holds = " OR ".join(f'position(%s in "{column.name}") > 0' for _ in forms)
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT id, "{column.name}" FROM "{column.table}" WHERE {where_range} ({holds})',  # noqa: S608
            args + forms,
        )
        rows = cursor.fetchall()
        for pk, data in rows:
            content = bytes(data)
            for form in forms:
                content = content.replace(form, token.encode())
            cursor.execute(
                f'UPDATE "{column.table}" SET "{column.name}" = %s WHERE id = %s',  # noqa: S608
                [content, pk],
            )
    return len(rows)


def tables_rewrite(
    value: str, token: str, opened: Callable[[], AbstractContextManager[Any]]
) -> list[list[Any]]:
    """Replace the value by its token everywhere in the app's tables, one range of ids at a
    time, each in a transaction `opened` makes (one where the erasure is running).
    Returns [table, column, rows changed] for every column where rows changed."""
    by_table: dict[str, list[Column]] = {}
    for column in value_columns():
        by_table.setdefault(column.table, []).append(column)
    touched: dict[tuple[str, str], int] = {}
    for table, columns in by_table.items():
        for bounds in id_ranges(table):
            where, args = ("", []) if bounds is None else ("id >= %s AND id < %s AND", list(bounds))
            with opened():
                for column in columns:
                    changed = _column_rewrite(column, value, token, where, args)
                    if changed:
                        key = (table, column.name)
                        touched[key] = touched.get(key, 0) + changed
    return [[table, name, rows] for (table, name), rows in sorted(touched.items())]


def protected_values_delete(value: str) -> int:
    """Delete the protected copies of the value that redaction at ingest kept, under every
    canonicalisation (each is kept under its token)."""
    tokens = sorted({token_of(value, rule) for rule in CANONICAL})
    deleted, _ = ProtectedValue.objects.filter(token__in=tokens).delete()
    return deleted


def audit_events_holding(value: str) -> list[int]:
    """The positions of audit events that hold the value: never rewritten (the chain would
    break), said in the report. No event copies a trace's values; people's own words can
    (a ticket's cause, a proposal's rationale or change, a decision's reason)."""
    escaped = json.dumps(value, ensure_ascii=False)[1:-1]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT position FROM reviewapp_auditevent WHERE position(%s in target) > 0 "
            "OR position(%s in data::text) > 0 ORDER BY position",
            [value, escaped],
        )
        return [row[0] for row in cursor.fetchall()]


def kept_files_rewrite(value: str, token: str) -> list[str]:
    """Rewrite every kept body in the uploads storage that holds the value (plain or gzip),
    with its token instead, under the same name; returns their names."""
    storage = storages[UPLOADS]
    forms = [form.encode() for form in spellings(value)]
    touched = []
    for name in _stored_names(storage, ""):
        with storage.open(name, "rb") as file:
            if not _holds(file, forms):
                continue
        _rewrite(storage, name, forms, token.encode())
        touched.append(name)
    return touched


def _stored_names(storage: Any, folder: str) -> Iterator[str]:
    folders, files = storage.listdir(folder)
    for name in files:
        yield f"{folder}/{name}" if folder else name
    for sub in folders:
        yield from _stored_names(storage, f"{folder}/{sub}" if folder else sub)


def _lines(file: IO[bytes]) -> Iterator[bytes]:
    head = file.read(2)
    file.seek(0)
    stream = cast(IO[bytes], gzip.GzipFile(fileobj=file)) if head == GZIP_MAGIC else file
    yield from stream


def _holds(file: IO[bytes], forms: list[bytes]) -> bool:
    return any(form in line for line in _lines(file) for form in forms)


def _rewrite(storage: Any, name: str, forms: list[bytes], token: bytes) -> None:
    with tempfile.TemporaryFile() as out:
        with storage.open(name, "rb") as file:
            zipped = file.read(2) == GZIP_MAGIC
            file.seek(0)
            target = cast(IO[bytes], gzip.GzipFile(fileobj=out, mode="wb")) if zipped else out
            for line in _lines(file):
                for form in forms:
                    line = line.replace(form, token)
                target.write(line)
            if zipped:
                target.close()
        out.seek(0)
        storage.delete(name)
        saved = storage.save(name, File(out))
    if saved != name:
        raise RuntimeError(f"kept body {name} was saved again as {saved}")
