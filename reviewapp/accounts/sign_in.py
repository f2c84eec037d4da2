"""Signing in, with attempts throttled per account and failures per client address.

Every attempt for a username counts until one succeeds (which clears the count), and it is
counted before the password is checked, so that guesses sent in parallel each take a
number: past SIGN_IN_MAX_FAILURES the rest are refused without checking the password.
Failures from one address count too (five times as many allowed, whatever the usernames).
A count lasts SIGN_IN_LOCKOUT_SECONDS from its first attempt. Counts live in the cache,
shared between web processes when CACHE_URL points at Redis (docker-compose does).
Behind a proxy (BEHIND_PROXY), the address is the one the proxy saw, the last hop of
X-Forwarded-For: every client would otherwise share the proxy's."""

from __future__ import annotations

import hashlib
import logging

from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.http import HttpRequest

log = logging.getLogger(__name__)
ADDRESS_FACTOR = 5


def _key(kind: str, value: str) -> str:
    # Hashed: usernames and addresses never become cache keys as typed.
    return f"sign-in:{kind}:{hashlib.sha256(value.encode()).hexdigest()}"


def _user_key(username: str) -> str:
    return _key("user", username.strip().casefold())


def client_address(request: HttpRequest | None) -> str:
    if request is None:
        return ""
    if settings.BEHIND_PROXY:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        if forwarded:
            return forwarded.split(",")[-1].strip()
    return request.META.get("REMOTE_ADDR", "")


def _count(key: str) -> int:
    """One more on this counter, atomically where the cache allows it (Redis does)."""
    cache.add(key, 0, settings.SIGN_IN_LOCKOUT_SECONDS)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, settings.SIGN_IN_LOCKOUT_SECONDS)
        return 1


def attempt_allowed(request: HttpRequest | None, username: str) -> bool:
    """Count this attempt; False when the username or the address is locked out."""
    address = client_address(request)
    limit = settings.SIGN_IN_MAX_FAILURES
    if address and (cache.get(_key("address", address)) or 0) >= limit * ADDRESS_FACTOR:
        return False
    return _count(_user_key(username)) <= limit


def record_failure(request: HttpRequest | None, username: str) -> None:
    address = client_address(request)
    if address:
        _count(_key("address", address))
    # Not the username as typed: people type passwords into the wrong box.
    who = hashlib.sha256(username.strip().casefold().encode()).hexdigest()[:12]
    log.warning("failed sign-in (username %s) from %s", who, address or "?")


def record_success(username: str) -> None:
    cache.delete(_user_key(username))


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's sign-in form, refusing to check passwords while a lockout lasts."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "locked": (
            "Too many failed sign-ins. Try again in %(minutes)s minutes, or ask an administrator."
        ),
    }

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        if not attempt_allowed(self.request, username):
            raise forms.ValidationError(
                self.error_messages["locked"],
                code="locked",
                params={"minutes": -(-settings.SIGN_IN_LOCKOUT_SECONDS // 60)},
            )
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            record_failure(self.request, username)
            raise
        record_success(username)
        return cleaned
