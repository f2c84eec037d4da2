"""What was recorded is never rewritten on SQLite either (the bare-machine default): the
same refusals as PostgreSQL's triggers of 0002, 0003 and 0004, in SQLite's trigger language.

(Django's flush of a test database deletes rows and would be refused here: the test suite
runs on PostgreSQL, whose flush truncates. SQLite alters a column by making its table
anew, which drops its triggers: a migration that does so puts them back, as 0011 does.)"""

from django.db import migrations

APPEND_ONLY_TABLES = [
    "reviewapp_auditevent",
    "reviewapp_judgement",
    "reviewapp_verdict",
    "reviewapp_finding",
    "reviewapp_traceline",
    "reviewapp_tracerecord",
    "reviewapp_policyversion",
    "reviewapp_ticketcomment",
    "reviewapp_prospectivesettlement",
]

# As 0004's guard: once decided, a proposal's decision never changes; the only later change
# allowed is recording the version that published it. Nothing is ever deleted.
PROPOSAL_CHANGED = """
NEW.kind IS NOT OLD.kind OR NEW.change IS NOT OLD.change OR NEW.rationale IS NOT OLD.rationale
OR NEW.proposed_by_id IS NOT OLD.proposed_by_id OR NEW.created_at IS NOT OLD.created_at
OR NEW.base_number IS NOT OLD.base_number
OR (OLD.state <> 'pending' AND (
    NEW.state IS NOT OLD.state OR NEW.decided_by_id IS NOT OLD.decided_by_id
    OR NEW.decided_at IS NOT OLD.decided_at OR NEW.decision_reason IS NOT OLD.decision_reason))
OR (OLD.published_in_id IS NOT NULL AND NEW.published_in_id IS NOT OLD.published_in_id)
"""


def _refuse(name: str, event: str, table: str, message: str, when: str = "") -> str:
    condition = f" WHEN {when}" if when else ""
    return (
        f"CREATE TRIGGER {name} BEFORE {event} ON {table}{condition} "
        f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
    )


def _triggers() -> dict[str, str]:
    triggers = {}
    for table in APPEND_ONLY_TABLES:
        for event in ("UPDATE", "DELETE"):
            name = f"{table}_no_{event.lower()}"
            triggers[name] = _refuse(
                name, event, table, f"append-only: {event} on {table} is refused"
            )
    proposals = "reviewapp_ruleproposal"
    triggers[f"{proposals}_no_delete"] = _refuse(
        f"{proposals}_no_delete",
        "DELETE",
        proposals,
        f"append-only: DELETE on {proposals} is refused",
    )
    triggers[f"{proposals}_guard"] = _refuse(
        f"{proposals}_guard",
        "UPDATE",
        proposals,
        "a decided proposal cannot be changed",
        when=PROPOSAL_CHANGED,
    )
    return triggers


def add_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    for statement in _triggers().values():
        schema_editor.execute(statement, params=None)


def drop_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    for name in _triggers():
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("reviewapp", "0008_ticket_combination_counts")]
    operations = [migrations.RunPython(add_triggers, drop_triggers)]
