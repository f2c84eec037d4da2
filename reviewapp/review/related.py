"""What surrounds a ticket: what its run's current judgement says of it when the run was
judged again since, the other tickets of its family and run, and who may work it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.db.models import Q

from reviewapp.accounts.roles import WORK_TICKET
from reviewapp.models import Finding, Judgement, Run, Ticket, Verdict
from reviewapp.review.stamp import cached


@dataclass(frozen=True)
class LaterJudgement:
    """What the run's current judgement says of a ticket opened under an earlier one (its
    run got more lines since, or was judged under a newer policy)."""

    policy_number: int
    # A conflict ticket: the verdict for the same entity and field now (kind "" if none).
    kind: str
    reason: str
    action: str
    # A finding ticket: whether the run is still found to have it.
    still_found: bool


def judged_again(opened_by: int | None, current: int | None) -> bool:
    """Whether a ticket's run has a current judgement other than the one that opened it."""
    return opened_by is not None and current is not None and opened_by != current


def later_judgement(ticket: Ticket) -> LaterJudgement | None:
    """None while the judgement that opened the ticket is its run's current one (`ticket`
    comes with its run)."""
    current = ticket.run.current_judgement_id
    if current is None or not judged_again(ticket.judgement_id, current):
        return None
    policy_number = Judgement.objects.values_list("policy_number", flat=True).get(pk=current)
    if ticket.kind == Ticket.Kind.FINDING:
        found = Finding.objects.filter(judgement_id=current, kind=ticket.finding_kind).exists()
        return LaterJudgement(policy_number, "", "", "", found)
    verdict = (
        Verdict.objects.filter(judgement_id=current, entity=ticket.entity, field=ticket.field)
        .values_list("kind", "reason", "action")
        .first()
    )
    kind, reason, action = verdict or ("", "", "")
    return LaterJudgement(policy_number, kind or "", reason or "", action or "", False)


@dataclass(frozen=True)
class RelatedTickets:
    """Other tickets of a ticket's family, newest first, and of its run, by id."""

    family: list[dict[str, Any]]
    same_run: list[dict[str, Any]]


def related_tickets(ticket: Ticket, *, shown: int) -> RelatedTickets:
    """Up to `shown` other tickets of the ticket's run, and of its family one more than
    `shown` (which tells there are more), in one statement."""
    tickets, runs = Ticket._meta.db_table, Run._meta.db_table
    columns = "t.id, t.reason, t.state, t.field, t.finding_kind"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT * FROM (SELECT 1, {columns}, r.run_id FROM {tickets} t "
            f"JOIN {runs} r ON r.id = t.run_id WHERE t.fingerprint = %s AND t.id <> %s "
            "ORDER BY t.created_at DESC, t.id DESC LIMIT %s) AS family UNION ALL "
            f"SELECT * FROM (SELECT 2, {columns}, '' FROM {tickets} t "
            "WHERE t.run_id = %s AND t.id <> %s ORDER BY t.id LIMIT %s) AS same_run",
            [ticket.fingerprint, ticket.pk, shown + 1, ticket.run_id, ticket.pk, shown],
        )
        rows = cursor.fetchall()
    names = ("pk", "reason", "state", "field", "finding_kind", "run__run_id")
    found = [(group, dict(zip(names, values, strict=True))) for group, *values in rows]
    return RelatedTickets(
        family=[row for group, row in found if group == 1],
        same_run=[row for group, row in found if group == 2],
    )


def ticket_workers() -> list[str]:
    """Usernames of the people who may work tickets, for the assign menus. Kept a minute:
    assigning checks the permission again, so a stale name can grant nothing."""

    def read() -> list[str]:
        app_label, codename = WORK_TICKET.split(".")
        permission = Permission.objects.filter(content_type__app_label=app_label, codename=codename)
        users = (
            get_user_model()
            .objects.filter(is_active=True)
            .filter(
                Q(groups__permissions__in=permission)
                | Q(user_permissions__in=permission)
                | Q(is_superuser=True)
            )
            .distinct()
            .order_by("username")
        )
        return [user.get_username() for user in users]

    return cached("tickets:workers", read)
