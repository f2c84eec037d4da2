"""TraceLine.identity as a UUID: the first 128 bits of the SHA-256 it held in hex (16
bytes in the unique index every ingest probes, not 64 characters). A line delivered again
after this migration gets the identity its stored copy now has, so it is still a
duplicate."""

from django.db import migrations, models


def identities_to_uuids(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "ALTER TABLE reviewapp_traceline ALTER COLUMN identity TYPE uuid "
            "USING left(identity, 32)::uuid"
        )
        return
    # SQLite keeps a UUID as its 32 hex digits, in a column of any declared type. Lines are
    # append-only: the guard is dropped for this one rewrite (if 0029 has not dropped it),
    # and put back after migrate (reviewapp.apps: install_sqlite_guards).
    schema_editor.execute("DROP TRIGGER IF EXISTS reviewapp_traceline_no_update")
    schema_editor.execute("UPDATE reviewapp_traceline SET identity = substr(identity, 1, 32)")


class Migration(migrations.Migration):
    dependencies = [
        ("reviewapp", "0029_native_record_is_its_line"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunPython(identities_to_uuids, migrations.RunPython.noop),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="traceline",
                    name="identity",
                    field=models.UUIDField(),
                ),
            ],
        ),
    ]
