"""Comments on tickets: what a reviewer said is never rewritten, so PostgreSQL refuses UPDATE
and DELETE on them, as it does for the audit trail (0002's function, a new trigger)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

TABLE = "reviewapp_ticketcomment"


def add_trigger(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        f"CREATE TRIGGER {TABLE}_append_only BEFORE UPDATE OR DELETE ON {TABLE} "
        "FOR EACH ROW EXECUTE FUNCTION crosscheck_refuse_change()"
    )


def drop_trigger(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP TRIGGER IF EXISTS {TABLE}_append_only ON {TABLE}")


class Migration(migrations.Migration):
    dependencies = [
        ("reviewapp", "0002_append_only"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="TicketComment",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("text", models.TextField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("author", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+", to=settings.AUTH_USER_MODEL)),
                ("ticket", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="comments", to="reviewapp.ticket")),
            ],
            options={"ordering": ["created_at", "id"]},
        ),
        migrations.RunPython(add_trigger, drop_trigger),
    ]
