"""The queue's kept counts are made from the filters' definitions (reviewapp/review/filters.py).

The counts per combination hold the combination as JSON (filter name -> value), not a
column per filter, so that a new counted filter needs no migration; the two triggers of
0007 and 0008, whose SQL named every counted column, give way to one that
reviewapp/review/counts.py makes from the definitions after every migrate (keep_counting),
counting every ticket again then. Filters PostgreSQL keeps no counts for are counted by a
plain GROUP BY (the name: the counts that are not kept)."""

import importlib

import django.contrib.postgres.indexes
from django.db import migrations, models

OLD_TRIGGERS = {
    "crosscheck_count_ticket_facets": "reviewapp_ticket_facets",
    "crosscheck_count_ticket_combinations": "reviewapp_ticket_combinations",
}
NEW_FUNCTION, NEW_TRIGGERS = "crosscheck_count_tickets", "reviewapp_ticket_counted"
EVENTS = ("insert", "update", "delete")


def _drop(schema_editor, function: str, triggers: str) -> None:
    for event in EVENTS:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {triggers}_{event} ON reviewapp_ticket")
    schema_editor.execute(f"DROP FUNCTION IF EXISTS {function}()")


def _forget_counts(schema_editor) -> None:
    schema_editor.execute("DELETE FROM reviewapp_ticketfacetdelta")
    schema_editor.execute("DELETE FROM reviewapp_ticketcombinationdelta")


def drop_column_triggers(apps, schema_editor):
    for function, triggers in OLD_TRIGGERS.items():
        _drop(schema_editor, function, triggers)
    _forget_counts(schema_editor)


def restore_column_triggers(apps, schema_editor):
    """Backwards: 0007's and 0008's triggers again, which count every ticket once."""
    for name in ("0007_review_desk_speed", "0008_ticket_combination_counts"):
        importlib.import_module(f"reviewapp.migrations.{name}").add_triggers(apps, schema_editor)


def drop_made_trigger(apps, schema_editor):
    """Backwards: the trigger counts.keep_counting made, and what it counted."""
    _drop(schema_editor, NEW_FUNCTION, NEW_TRIGGERS)
    _forget_counts(schema_editor)


class Migration(migrations.Migration):
    dependencies = [("reviewapp", "0036_foreign_keys_instead_of_reference_triggers")]

    operations = [
        migrations.RunPython(drop_column_triggers, restore_column_triggers),
        migrations.RemoveIndex(model_name="ticketcombinationdelta", name="combination_state_reason"),
        *(
            migrations.RemoveField(model_name="ticketcombinationdelta", name=name)
            for name in (
                "state",
                "reason",
                "finding_kind",
                "field",
                "action",
                "sources",
                "unsafe",
                "assignee",
                "agent",
            )
        ),
        migrations.AddField(
            model_name="ticketcombinationdelta",
            name="combination",
            field=models.JSONField(default=dict),
        ),
        migrations.AddIndex(
            model_name="ticketcombinationdelta",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["combination"], name="combination_contains", opclasses=["jsonb_path_ops"]
            ),
        ),
        migrations.RunPython(migrations.RunPython.noop, drop_made_trigger),
    ]
