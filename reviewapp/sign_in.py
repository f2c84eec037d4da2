"""Signing in, with failed attempts throttled per account and per client address.

After SIGN_IN_MAX_FAILURES wrong passwords for one username (or five times as many from one
address, whatever the usernames) within SIGN_IN_LOCKOUT_SECONDS, further attempts are
refused without checking the password, until the window has passed: guessing stops paying.
A successful sign-in clears its username's count. Counts live in the cache, so they are
shared between web processes when CACHE_URL points at Redis (docker-compose does)."""

from __future__ import annotations

import hashlib
import logging
import math
import time

from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.http import HttpRequest

log = logging.getLogger(__name__)
ADDRESS_FACTOR = 5


def _key(kind: str, value: str) -> str:
    # Hashed: usernames and addresses never become cache keys as typed.
    return f"sign-in-failures:{kind}:{hashlib.sha256(value.encode()).hexdigest()}"


def _keys(request: HttpRequest | None, username: str) -> list[tuple[str, int]]:
    """Each counter with the number of failures that locks it."""
    limit = settings.SIGN_IN_MAX_FAILURES
    keys = [(_key("user", username.strip().casefold()), limit)]
    address = request.META.get("REMOTE_ADDR", "") if request is not None else ""
    if address:
        keys.append((_key("address", address), limit * ADDRESS_FACTOR))
    return keys


def seconds_locked(request: HttpRequest | None, username: str) -> int:
    """How long sign-ins for this username from this address stay refused (0: allowed)."""
    now = time.time()
    remaining = 0.0
    for key, limit in _keys(request, username):
        failures = cache.get(key)
        if failures and failures["count"] >= limit:
            remaining = max(remaining, failures["until"] - now)
    return math.ceil(remaining) if remaining > 0 else 0


def record_failure(request: HttpRequest | None, username: str) -> None:
    window = settings.SIGN_IN_LOCKOUT_SECONDS
    for key, _ in _keys(request, username):
        failures = cache.get(key) or {"count": 0}
        # Every failure restarts the window: a patient guesser stays locked out.
        cache.set(key, {"count": failures["count"] + 1, "until": time.time() + window}, window)
    log.warning("failed sign-in for %r", username[:150])


def record_success(username: str) -> None:
    cache.delete(_key("user", username.strip().casefold()))


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's sign-in form, refusing to check passwords while a lockout lasts."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "locked": (
            "Too many failed sign-ins. Try again in %(minutes)s minute(s), or ask an administrator."
        ),
    }

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        locked = seconds_locked(self.request, username)
        if locked:
            raise forms.ValidationError(
                self.error_messages["locked"],
                code="locked",
                params={"minutes": math.ceil(locked / 60)},
            )
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            record_failure(self.request, username)
            raise
        record_success(username)
        return cleaned
