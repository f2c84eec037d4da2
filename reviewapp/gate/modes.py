"""Gate modes per action: shadow (count only) or enforce, chosen by an approver. Kept
append-only: each choice is a new row, the latest per action wins, and an action never
chosen is in shadow. Every choice is an AuditEvent too."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Max

from reviewapp.models import AuditEvent, GateMode

SHADOW, ENFORCE = GateMode.Mode.SHADOW.value, GateMode.Mode.ENFORCE.value
MAX_ACTION = 200


class GateModeError(ValueError):
    """A mode that cannot be set as asked; the message says why."""


def mode_of(action: str) -> str:
    """The gate's mode for an action (one indexed query)."""
    found = (
        GateMode.objects.filter(action=action).order_by("-id").values_list("mode", flat=True)
    ).first()
    return found or SHADOW


def modes_current() -> list[GateMode]:
    """The latest choice for each action ever chosen, by action."""
    latest = GateMode.objects.values("action").annotate(last=Max("id")).values("last")
    return list(
        GateMode.objects.filter(pk__in=latest).select_related("chosen_by").order_by("action")
    )


def mode_set(action: str, mode: str, *, user: Any, reason: str) -> GateMode:
    """Record an approver's choice for an action."""
    action = action.strip()
    if not action or len(action) > MAX_ACTION:
        raise GateModeError(f"an action is named by 1 to {MAX_ACTION} characters")
    if mode not in (SHADOW, ENFORCE):
        raise GateModeError(f'a mode is "{SHADOW}" or "{ENFORCE}"')
    if not reason.strip():
        raise GateModeError("say why")
    with transaction.atomic():
        chosen = GateMode.objects.create(
            action=action, mode=mode, reason=reason.strip(), chosen_by=user
        )
        AuditEvent.objects.create(
            actor=user,
            verb="gate.mode",
            target=f"gate for {action}"[:200],
            data={"action": action, "mode": mode, "reason": reason.strip()},
        )
    return chosen


def mode_history(limit: int = 50) -> list[GateMode]:
    return list(GateMode.objects.select_related("chosen_by").order_by("-id")[:limit])
