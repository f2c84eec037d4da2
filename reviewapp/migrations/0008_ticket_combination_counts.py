"""The queue's counts within its filters, kept by PostgreSQL as tickets are opened and changed.

Triggers on reviewapp_ticket append, per statement, one row per combination of the counted
filter values whose count the statement changed, with the difference: the same append-only
way as 0007's counts per value, over the same rows of the statement (its transition tables).
Existing tickets are counted once here.

(SQLite, the bare-machine default, gets no triggers: the queue counts its tickets instead.)"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# The changed rows of a statement, each with its sign (as 0007 reads them; written again
# here so that no migration depends on another's code).
COUNTED_COLUMNS = "state, reason, finding_kind, field, action, unsafe, assignee_id, agent, sources"
OLD_COUNTED = ", ".join(f"o.{c.strip()}" for c in COUNTED_COLUMNS.split(","))
NEW_COUNTED = ", ".join(f"n.{c.strip()}" for c in COUNTED_COLUMNS.split(","))
INSERTED = "SELECT n.*, 1 AS sign FROM new_rows AS n"
DELETED = "SELECT o.*, -1 AS sign FROM old_rows AS o"
# Most updates change no counted column (a revision, a date): those rows are left out early.
UPDATED = (
    f"SELECT n.*, 1 AS sign FROM new_rows AS n JOIN old_rows AS o USING (id) "
    f"WHERE ({NEW_COUNTED}) IS DISTINCT FROM ({OLD_COUNTED}) "
    f"UNION ALL "
    f"SELECT o.*, -1 AS sign FROM old_rows AS o JOIN new_rows AS n USING (id) "
    f"WHERE ({NEW_COUNTED}) IS DISTINCT FROM ({OLD_COUNTED})"
)
# A trigger with transition tables fires on one kind of statement: three of them.
TRIGGERS = {
    "INSERT": "REFERENCING NEW TABLE AS new_rows",
    "UPDATE": "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "DELETE": "REFERENCING OLD TABLE AS old_rows",
}


def q(sql: str) -> str:
    return "$counted$" + sql + "$counted$"

COMBINATION = "state, reason, finding_kind, field, action, sources, unsafe, assignee_id, agent"
SUMMED = f"""
INSERT INTO reviewapp_ticketcombinationdelta ({COMBINATION}, tickets)
SELECT {", ".join(f"c.{column.strip()}" for column in COMBINATION.split(","))}, SUM(c.sign)
FROM ({{changed}}) AS c
GROUP BY {", ".join(str(i) for i in range(1, len(COMBINATION.split(",")) + 1))}
HAVING SUM(c.sign) <> 0
"""

FUNCTION = f"""
CREATE OR REPLACE FUNCTION crosscheck_count_ticket_combinations() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        EXECUTE format({q(SUMMED)}, {q(INSERTED)});
    ELSIF TG_OP = 'DELETE' THEN
        EXECUTE format({q(SUMMED)}, {q(DELETED)});
    ELSE
        EXECUTE format({q(SUMMED)}, {q(UPDATED)});
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""


def add_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    # format() reads %s as its placeholder: the template has no other % sign.
    schema_editor.execute(FUNCTION.replace("{changed}", "%s"), params=None)
    for event, referencing in TRIGGERS.items():
        schema_editor.execute(
            f"CREATE TRIGGER reviewapp_ticket_combinations_{event.lower()} AFTER {event} "
            f"ON reviewapp_ticket {referencing} "
            "FOR EACH STATEMENT EXECUTE FUNCTION crosscheck_count_ticket_combinations()"
        )
    # The tickets there already, counted once.
    schema_editor.execute(
        SUMMED.format(changed="SELECT t.*, 1 AS sign FROM reviewapp_ticket AS t"), params=None
    )


def drop_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for event in TRIGGERS:
        schema_editor.execute(
            f"DROP TRIGGER IF EXISTS reviewapp_ticket_combinations_{event.lower()} "
            "ON reviewapp_ticket"
        )
    schema_editor.execute("DROP FUNCTION IF EXISTS crosscheck_count_ticket_combinations()")


class Migration(migrations.Migration):
    dependencies = [
        ("reviewapp", "0007_review_desk_speed"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="TicketCombinationDelta",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("state", models.CharField(max_length=10)),
                ("reason", models.CharField(max_length=60)),
                ("finding_kind", models.CharField(max_length=60)),
                ("field", models.TextField()),
                ("action", models.TextField()),
                ("sources", models.TextField()),
                ("unsafe", models.BooleanField()),
                ("agent", models.CharField(max_length=200)),
                ("tickets", models.IntegerField()),
                (
                    "assignee",
                    models.ForeignKey(
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["state", "reason"], name="combination_state_reason")
                ],
            },
        ),
        migrations.RunPython(add_triggers, drop_triggers),
        # Reason-filtered counts come from the combinations now; the indexes serve the
        # queue's order in full (created_at, then id).
        migrations.RemoveIndex(model_name="ticket", name="ticket_state_created"),
        migrations.RemoveIndex(model_name="ticket", name="ticket_reason_counted"),
        migrations.AddIndex(
            model_name="ticket",
            index=models.Index(fields=["state", "-created_at", "-id"], name="ticket_state_newest"),
        ),
        migrations.AddIndex(
            model_name="ticket",
            index=models.Index(
                fields=["state", "reason", "-created_at", "-id"], name="ticket_reason_newest"
            ),
        ),
    ]
