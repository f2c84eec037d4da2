"""The fingerprint is indexed once, by ticket_family_created (fingerprint first)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reviewapp", "0011_drop_redundant_indexes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="ticket",
            name="fingerprint",
            field=models.CharField(max_length=16),
        ),
    ]
