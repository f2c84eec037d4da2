"""Stable tokens: a value is canonicalised by a named rule and replaced by a keyed hash of
it (HMAC-SHA-256 under REDACTION_SECRET), so the same value from two sources gives the
same token, and joins and comparisons on it still hold, while the value cannot be read
back from the token (only from a protected copy, where a rule keeps one)."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable
from typing import Any

from django.conf import settings

TOKEN_PREFIX = "tok_"
_NOT_DIGITS = re.compile(r"\D+")
_SPACES = re.compile(r"\s+")

# Named canonicalisations: what two spellings of one value have in common.
CANONICAL: dict[str, Callable[[str], str]] = {
    "exact": lambda text: text,
    "trim": lambda text: _SPACES.sub(" ", text.strip()),
    "casefold": lambda text: _SPACES.sub(" ", text.strip()).casefold(),
    "digits": lambda text: _NOT_DIGITS.sub("", text),
}


def canonical(value: Any, rule: str = "exact") -> str:
    """The text a value is tokenised as: a string through the named rule; anything else as
    its compact JSON, marked as not text, so that 42 and "42" stay as different as the
    engine sees them, unless the rule is digits (which makes them one on purpose)."""
    if rule not in CANONICAL:
        raise ValueError(f"no canonicalisation named {rule!r}: one of {', '.join(CANONICAL)}")
    if isinstance(value, str):
        return CANONICAL[rule](value)
    text = json.dumps(value, separators=(",", ":"), sort_keys=True)
    return CANONICAL[rule](text) if rule == "digits" else "\x00json:" + text


def token_of(value: Any, rule: str = "exact", *, secret: bytes | None = None) -> str:
    """The stable token of `value` canonicalised by `rule` (under REDACTION_SECRET, or
    `secret` for a token that must not match the stored ones)."""
    key = secret if secret is not None else settings.REDACTION_SECRET.encode()
    mac = hmac.new(key, canonical(value, rule).encode(), hashlib.sha256)
    return TOKEN_PREFIX + mac.hexdigest()[:24]


def is_token(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(TOKEN_PREFIX) and len(value) == 28
