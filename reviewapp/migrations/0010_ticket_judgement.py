"""Tickets name the judgement that opened them (filled in for those already open), so a
ticket page sees at once whether its run was judged again since."""

import django.db.models.deletion
from django.db import migrations, models

FILL = """
UPDATE reviewapp_ticket SET judgement_id = COALESCE(
    (SELECT v.judgement_id FROM reviewapp_verdict v WHERE v.id = reviewapp_ticket.verdict_id),
    (SELECT f.judgement_id FROM reviewapp_finding f WHERE f.id = reviewapp_ticket.finding_id)
)
WHERE verdict_id IS NOT NULL OR finding_id IS NOT NULL
"""


class Migration(migrations.Migration):
    dependencies = [("reviewapp", "0009_sqlite_append_only")]

    operations = [
        migrations.AddField(
            model_name="ticket",
            name="judgement",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="reviewapp.judgement",
            ),
        ),
        migrations.RunSQL(FILL, reverse_sql=migrations.RunSQL.noop),
    ]
