"""The queue's counts per filter value, kept by PostgreSQL as tickets are opened and changed.

Triggers on reviewapp_ticket append, per statement, one row per (state, dimension, value)
whose count the statement changed, with the difference: appending never waits on another
transaction, where updating shared totals would make every two ticket changes queue up (and
could deadlock two bulk changes). Existing tickets are counted once here.

(SQLite, the bare-machine default, gets no triggers: the queue counts its tickets instead.)"""

from django.db import migrations, models

# One row per counted value of each ticket in `changed` (which has the ticket's columns and a
# `sign`, +1 or -1), summed per state, dimension and value. Values as the queue shows them;
# sources are a sorted, comma-joined list, counted one by one; the assignee as a user id.
SUMMED = """
INSERT INTO reviewapp_ticketfacetdelta (state, dimension, value, tickets)
SELECT c.state, counted.dimension, counted.value, SUM(c.sign)
FROM ({changed}) AS c
CROSS JOIN LATERAL (
    VALUES
        ('state', c.state::text),
        ('reason', c.reason::text),
        ('finding_kind', c.finding_kind::text),
        ('field', c.field),
        ('action', c.action),
        ('unsafe', CASE WHEN c.unsafe THEN 'yes' ELSE 'no' END),
        ('assignee', COALESCE(c.assignee_id::text, '')),
        ('agent', c.agent::text)
    UNION ALL
    SELECT 'source', source FROM unnest(string_to_array(c.sources, ',')) AS source
    WHERE source <> ''
) AS counted (dimension, value)
GROUP BY 1, 2, 3
HAVING SUM(c.sign) <> 0
"""

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


def _dollar_quoted(sql: str) -> str:
    return "$counted$" + sql + "$counted$"


FUNCTION = f"""
CREATE OR REPLACE FUNCTION crosscheck_count_ticket_facets() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        EXECUTE format({_dollar_quoted(SUMMED)}, {_dollar_quoted(INSERTED)});
    ELSIF TG_OP = 'DELETE' THEN
        EXECUTE format({_dollar_quoted(SUMMED)}, {_dollar_quoted(DELETED)});
    ELSE
        EXECUTE format({_dollar_quoted(SUMMED)}, {_dollar_quoted(UPDATED)});
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""

# A trigger with transition tables fires on one kind of statement: three of them.
TRIGGERS = {
    "INSERT": "REFERENCING NEW TABLE AS new_rows",
    "UPDATE": "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "DELETE": "REFERENCING OLD TABLE AS old_rows",
}


def add_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    # format() reads %s as its placeholder: the template has no other % sign.
    schema_editor.execute(FUNCTION.replace("{changed}", "%s"), params=None)
    for event, referencing in TRIGGERS.items():
        schema_editor.execute(
            f"CREATE TRIGGER reviewapp_ticket_facets_{event.lower()} AFTER {event} "
            f"ON reviewapp_ticket {referencing} "
            "FOR EACH STATEMENT EXECUTE FUNCTION crosscheck_count_ticket_facets()"
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
            f"DROP TRIGGER IF EXISTS reviewapp_ticket_facets_{event.lower()} ON reviewapp_ticket"
        )
    schema_editor.execute("DROP FUNCTION IF EXISTS crosscheck_count_ticket_facets()")


class Migration(migrations.Migration):
    dependencies = [("reviewapp", "0006_ticket_queue_indexes")]

    operations = [
        migrations.CreateModel(
            name="TicketFacetDelta",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("state", models.CharField(max_length=10)),
                ("dimension", models.CharField(max_length=20)),
                ("value", models.TextField()),
                ("tickets", models.IntegerField()),
            ],
        ),
        migrations.RunPython(add_triggers, drop_triggers),
        migrations.AddIndex(
            model_name="ticket",
            index=models.Index(
                fields=["state", "reason", "unsafe"],
                include=["finding_kind", "field", "action", "sources", "assignee", "agent"],
                name="ticket_reason_counted",
            ),
        ),
    ]
