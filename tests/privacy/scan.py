"""Where a text is stored: every column of every table the app can read that holds it,
text, JSON and bytes alike (the scan retention's and erasure's tests end with)."""

from __future__ import annotations

from django.db import connection


def columns_holding(text: str) -> list[str]:
    """table.column of every column holding `text` anywhere."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, a.attname, format_type(a.atttypid, NULL) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public' "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
            "WHERE c.relkind IN ('r', 'p', 'm') AND a.atttypid = ANY(ARRAY["
            "'text', 'varchar', 'json', 'jsonb', 'bytea']::regtype[]::oid[]) "
            "AND has_table_privilege(c.oid, 'SELECT') ORDER BY 1, 2"
        )
        columns = cursor.fetchall()
        found = []
        for table, column, kind in columns:
            where = (
                f"position(convert_to(%s, 'UTF8') in \"{column}\") > 0"
                if kind == "bytea"
                else f'strpos("{column}"::text, %s) > 0'
            )
            cursor.execute(f'SELECT EXISTS (SELECT 1 FROM "{table}" WHERE {where})', [text])
            if cursor.fetchone()[0]:
                found.append(f"{table}.{column}")
    return found
