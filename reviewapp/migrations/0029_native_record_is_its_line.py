"""A native line's record is the line, stored once: TraceRecord.data is NULL for it, and
read from the line's bytes (models.record_document). Records stored before keep theirs."""

from django.db import migrations, models


def drop_sqlite_guards(apps, schema_editor):
    """SQLite alters a column by making its table anew, and refuses to rename the new one
    while a trigger of another table names it: every guard is dropped here, and all are
    made again after migrate (reviewapp.apps: install_sqlite_guards)."""
    if schema_editor.connection.vendor != "sqlite":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        names = [name for (name,) in cursor.fetchall()]
    for name in names:
        schema_editor.execute(f'DROP TRIGGER "{name}"')


class Migration(migrations.Migration):
    dependencies = [
        ("reviewapp", "0028_guards_planned_per_statement"),
    ]

    operations = [
        migrations.RunPython(drop_sqlite_guards, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="tracerecord",
            name="data",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
