"""Indexes kept twice are dropped: a foreign key whose column already leads another index,
or that is never looked up by. Ingest writes millions of these rows."""

import django.db.models.deletion
from django.db import migrations, models

# SQLite alters a column by making its table anew, which drops the table's triggers: the
# append-only guards are put back after every migrate (reviewapp/models/guards.py).


class Migration(migrations.Migration):
    dependencies = [
        ("reviewapp", "0010_ticket_judgement"),
    ]

    operations = [
        migrations.AlterField(
            model_name="finding",
            name="run",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="reviewapp.run",
            ),
        ),
        migrations.AlterField(
            model_name="judgement",
            name="run",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="judgements",
                to="reviewapp.run",
            ),
        ),
        migrations.AlterField(
            model_name="ticket",
            name="finding",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="reviewapp.finding",
            ),
        ),
        migrations.AlterField(
            model_name="ticket",
            name="run",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="tickets",
                to="reviewapp.run",
            ),
        ),
        migrations.AlterField(
            model_name="ticket",
            name="verdict",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="reviewapp.verdict",
            ),
        ),
        migrations.AlterField(
            model_name="traceline",
            name="batch",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="trace_lines",
                to="reviewapp.ingestbatch",
            ),
        ),
        migrations.AlterField(
            model_name="tracerecord",
            name="run",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="records",
                to="reviewapp.run",
            ),
        ),
        migrations.AlterField(
            model_name="verdict",
            name="run",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="reviewapp.run",
            ),
        ),
    ]
