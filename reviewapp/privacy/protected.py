"""Raw values kept behind their tokens, where a redaction rule says so (keep_raw): Fernet
ciphertext under PROTECTED_VALUES_KEY, one row per token, written in the transaction
that stores the lines they came from. Reading one back is protected_value(token); who may
call it, and recording that they did, is the caller's to check."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.db import connection

from reviewapp.models import ProtectedValue


@cache
def _fernet(key: str) -> Fernet:
    return Fernet(key.encode())


def fernet() -> Fernet:
    return _fernet(settings.PROTECTED_VALUES_KEY)


class ProtectedValues:
    """Encrypts each token's raw value once (per ingest), for protect() to write."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._fernet = fernet()

    def encrypt(self, kept: Iterable[tuple[str, str, str]]) -> list[tuple[str, str, bytes]]:
        """(token, rule, ciphertext) of the tokens not seen before by this object."""
        rows = []
        for token, raw, rule in kept:
            if token in self._seen:
                continue
            self._seen.add(token)
            rows.append((token, rule, self._fernet.encrypt(raw.encode())))
        return rows


def protect(rows: list[tuple[str, str, bytes]]) -> None:
    """Store (token, rule, ciphertext) rows; a token stored already keeps its row."""
    if not rows:
        return
    tokens, rules, ciphertexts = (list(column) for column in zip(*rows, strict=True))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {ProtectedValue._meta.db_table} (token, rule, ciphertext) "
            "SELECT * FROM unnest(%s::text[], %s::text[], %s::bytea[]) "
            "ON CONFLICT (token) DO NOTHING",
            [tokens, rules, ciphertexts],
        )


def protected_value(token: str) -> str | None:
    """The raw value behind a token, decrypted; None when none is kept (or it cannot be
    decrypted with the current key)."""
    ciphertext = (
        ProtectedValue.objects.filter(token=token).values_list("ciphertext", flat=True).first()
    )
    if ciphertext is None:
        return None
    try:
        return fernet().decrypt(bytes(ciphertext)).decode()
    except InvalidToken:
        return None
