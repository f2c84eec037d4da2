"""Who acts on the command line: whoever holds the API token given (--token, or the
CROSSCHECK_TOKEN environment variable; made on the API tokens page). A name alone proves
nothing, so one operator cannot act as two people where four eyes are needed."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import CommandError

from reviewapp.ingest.tokens import authenticate_token

TOKEN_VARIABLE = "CROSSCHECK_TOKEN"


def token_holder(raw: str | None, permission: str) -> Any:
    """The person who holds the token `raw` (else $CROSSCHECK_TOKEN), if they may do this."""
    raw = raw or os.environ.get(TOKEN_VARIABLE, "")
    if not raw:
        raise CommandError(f"say who you are: --token with your API token, or set {TOKEN_VARIABLE}")
    token = authenticate_token(raw.strip())
    if token is None:
        raise CommandError("this API token is not valid (unknown, revoked, or its user inactive)")
    user = token.user
    if not user.has_perm(permission):
        raise CommandError(f"{user.get_username()} may not do this ({permission})")
    return user
