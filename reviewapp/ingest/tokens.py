"""Bearer tokens for the ingest API: shown once, stored as a SHA-256, revocable."""

from __future__ import annotations

import hashlib
import secrets

from django.db import transaction
from django.utils import timezone

from reviewapp.models import ApiToken, AuditEvent

TOKEN_PREFIX = "cc_"


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def create_token(*, user, name: str) -> tuple[ApiToken, str]:
    """A new token and its raw value, which is never stored and cannot be shown again."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user, name=name, prefix=raw[:10], token_hash=_hash(raw)
        )
        _audit(token, "token.created")
    return token, raw


def revoke_token(token: ApiToken) -> None:
    """Revoked by its owner (the only one who sees it)."""
    if token.revoked_at is None:
        with transaction.atomic():
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            _audit(token, "token.revoked")


def _audit(token: ApiToken, verb: str) -> None:
    AuditEvent.objects.create(
        actor=token.user, verb=verb, target=f"API token {token.prefix}…", data={"name": token.name}
    )


def authenticate_bearer(header: str | None) -> ApiToken | None:
    """The live token named by an `Authorization: Bearer …` header, or None."""
    if not header or not header.startswith("Bearer "):
        return None
    raw = header.removeprefix("Bearer ").strip()
    token = (
        ApiToken.objects.select_related("user")
        .filter(token_hash=_hash(raw), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is not None:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token
