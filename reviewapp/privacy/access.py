"""Who sees raw data: raw trace lines and envelopes are read only by a person with the raw
data permission (accounts.roles.SEE_RAW_DATA, given beside a role), only on purpose (a
request that says why; a plain page view never shows them), and every reading is an audit
event naming who, which lines and why. Everyone else reads the structured evidence and
tokens (privacy.tokens) in place of identities."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reviewapp.accounts.audit import audit_record
from reviewapp.accounts.roles import SEE_RAW_DATA
from reviewapp.models import TraceLine
from reviewapp.privacy.protected import protected_value
from reviewapp.privacy.tokens import is_token

RAW_VIEWED = "raw.view"
REASON_MAX = 500
# What a page says where raw data would be, to a person without the permission.
RAW_WITHHELD = "Raw data is shown only to people with the raw data permission."


class RawAccessRefused(Exception):
    """Not read: no permission (`forbidden`), or no reason given."""

    def __init__(self, message: str, *, forbidden: bool):
        super().__init__(message)
        self.forbidden = forbidden


def can_see_raw(user: Any) -> bool:
    return bool(user is not None and user.is_active and user.has_perm(SEE_RAW_DATA))


def raw_reason(user: Any, reason: str | None) -> str:
    """The reason given, checked, or RawAccessRefused: the permission first, then a reason
    (something besides spaces, at most REASON_MAX characters)."""
    if not can_see_raw(user):
        raise RawAccessRefused("you do not have the raw data permission", forbidden=True)
    text = " ".join((reason or "").split())
    if "\x00" in text:
        raise RawAccessRefused("a reason cannot hold a NUL character", forbidden=False)
    if not text:
        raise RawAccessRefused("say why you need the raw data", forbidden=False)
    if len(text) > REASON_MAX:
        raise RawAccessRefused(f"the reason is over {REASON_MAX} characters", forbidden=False)
    return text


def raw_view_record(
    user: Any, *, reason: str, what: str, lines: Sequence[TraceLine] = (), ticket: Any = None
) -> None:
    """Record that `user` read raw data (`what`: a line, a ticket's envelopes, a handoff
    with identities, an export), with the lines it showed and why. The caller has checked
    the reason with raw_reason."""
    audit_record(
        actor=user,
        verb=RAW_VIEWED,
        target=what,
        ticket=ticket,
        reason=reason,
        lines=[_line_ref(line) for line in lines],
    )


def raw_lines_read(
    user: Any,
    lines: Sequence[TraceLine],
    *,
    reason: str | None,
    what: str,
    ticket: Any = None,
) -> list[TraceLine]:
    """The lines, once the permission and the reason are checked and the reading recorded
    (RawAccessRefused otherwise, and nothing recorded)."""
    why = raw_reason(user, reason)
    raw_view_record(user, reason=why, what=what, lines=lines, ticket=ticket)
    return list(lines)


def protected_value_read(user: Any, token: str, *, reason: str | None) -> str | None:
    """The raw value a redaction rule kept behind `token` (None when none is kept), once the
    permission and the reason are checked and the reading recorded (RawAccessRefused
    otherwise, and nothing recorded)."""
    why = raw_reason(user, reason)
    token = token.strip()
    if not is_token(token):
        raise RawAccessRefused(
            f"{token[:40]!r} is not a token (tok_ and 24 hex digits)", forbidden=False
        )
    raw_view_record(user, reason=why, what=f"protected value {token}")
    return protected_value(token)


def _line_ref(line: TraceLine) -> dict[str, Any]:
    return {
        "line": line.pk,
        "batch": str(line.batch.public_id),
        "lineNumber": line.line_number,
    }
