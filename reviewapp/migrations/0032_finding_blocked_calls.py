"""A finding keeps the calls of its evidence that are blocked actions (engine
Finding.blocked): a retried operation's first attempt is evidence of
retry-without-idempotency-key, and was no blocked action. Findings stored before keep NULL,
which blocks every call of their evidence, as it did (judging.blocking). A nullable column
without a default: no table is made anew, on SQLite either."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reviewapp", "0031_references_checked_once_per_value"),
    ]

    operations = [
        migrations.AddField(
            model_name="finding",
            name="blocked",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
