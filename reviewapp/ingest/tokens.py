"""API tokens: shown once, stored as a SHA-256, revocable. They authenticate the ingest API
(a bearer token) and the decisions made on the command line (manage.py policy --token)."""

from __future__ import annotations

import hashlib
import secrets

from django.db import transaction
from django.utils import timezone

from reviewapp.accounts.audit import audit_record
from reviewapp.models import ApiToken

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
    audit_record(actor=token.user, verb=verb, target=f"API token {token.prefix}…", name=token.name)


def authenticate_bearer(header: str | None) -> ApiToken | None:
    """The live token named by an `Authorization: Bearer …` header, or None. The scheme is
    case-insensitive (RFC 9110, 11.1): `bearer` and `BEARER` name it too."""
    scheme, _, credentials = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return authenticate_token(credentials.strip())


def authenticate_token(raw: str) -> ApiToken | None:
    """The live token of an active user whose raw value this is, or None (the command
    line's decisions are made with one: whoever holds it is its user)."""
    if not raw:
        return None
    token = (
        ApiToken.objects.select_related("user")
        .filter(token_hash=_hash(raw), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is not None:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token
