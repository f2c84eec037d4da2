"""What was recorded is never rewritten: PostgreSQL refuses UPDATE and DELETE on these tables.

(SQLite, the bare-machine default, does not get the triggers: its test-database flush
deletes rows. Production runs on PostgreSQL.)"""

from django.db import migrations

APPEND_ONLY_TABLES = [
    "reviewapp_auditevent",
    "reviewapp_judgement",
    "reviewapp_verdict",
    "reviewapp_finding",
    "reviewapp_traceline",
    "reviewapp_tracerecord",
    "reviewapp_policyversion",
]

FUNCTION = """
CREATE OR REPLACE FUNCTION crosscheck_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'append-only: % on % is refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$ LANGUAGE plpgsql;
"""


def add_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(FUNCTION, params=None)
    for table in APPEND_ONLY_TABLES:
        schema_editor.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION crosscheck_refuse_change()"
        )


def drop_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in APPEND_ONLY_TABLES:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
    schema_editor.execute("DROP FUNCTION IF EXISTS crosscheck_refuse_change()")


class Migration(migrations.Migration):
    dependencies = [("reviewapp", "0001_initial")]
    operations = [migrations.RunPython(add_triggers, drop_triggers)]
