"""Roles are Django groups made of the app's permissions; every view checks a permission
on the server, never only by hiding a button."""

from django.contrib.auth.models import Group, Permission

VIEWER, REVIEWER, APPROVER, ADMIN = "viewer", "reviewer", "approver", "admin"
INGEST = "reviewapp.ingest_traces"
WORK_TICKET = "reviewapp.work_ticket"
PROPOSE_RULE = "reviewapp.propose_rule"
APPROVE_RULE = "reviewapp.approve_rule"
CLOSE_MONTH = "reviewapp.close_month"
RUN_REPLAY = "reviewapp.run_replay"

ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    VIEWER: (),
    REVIEWER: (INGEST, WORK_TICKET, PROPOSE_RULE, RUN_REPLAY),
    APPROVER: (INGEST, WORK_TICKET, PROPOSE_RULE, APPROVE_RULE, CLOSE_MONTH, RUN_REPLAY),
    ADMIN: (INGEST, WORK_TICKET, PROPOSE_RULE, APPROVE_RULE, CLOSE_MONTH, RUN_REPLAY),
}


def ensure_roles(**_kwargs) -> None:
    """Create or repair the role groups (run after every migrate)."""
    for role, permissions in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        codenames = [name.split(".", 1)[1] for name in permissions]
        group.permissions.set(
            Permission.objects.filter(content_type__app_label="reviewapp", codename__in=codenames)
        )
