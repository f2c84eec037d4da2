"""Signing in with the organisation's identity provider (OpenID Connect, through
mozilla-django-oidc), on when OIDC_RP_CLIENT_ID is set (settings.py, docs/sign-in.md).

The provider names the account (the OIDC_USERNAME_CLAIM claim of its user info: an account
of that name is the one signed in, made if there is none) and its groups (OIDC_ROLE_CLAIM).
At every sign-in the groups give the role, through account_role_set, so that a change at
the provider changes the role at the next sign-in, audited like any other change of role.
A person in no mapped group gets OIDC_DEFAULT_ROLE or, unset, is refused and loses any role
the account had. A deactivated account is refused and left as it is. Django's superuser
flag is not the provider's to give or take: it stays as it is."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import jwt
import requests
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from reviewapp.accounts.roles import (
    ADMIN,
    APPROVER,
    REVIEWER,
    ROLE_PERMISSIONS,
    VIEWER,
    LastAdminError,
    account_role_set,
)

log = logging.getLogger(__name__)

# Weakest first: a person in several mapped groups gets the strongest of their roles.
ROLE_STRENGTH = (VIEWER, REVIEWER, APPROVER, ADMIN)

# Why a sign-in was refused, told on the sign-in page (request.identity_provider_refusal).
NO_ROLE = "Your account at the identity provider is in no group that has a role here."
DEACTIVATED = "This account is deactivated. Ask an administrator."
NO_ANSWER = "The identity provider did not answer as expected. Try again, or use a password."
LAST_ADMIN = (
    "Your identity provider no longer makes you an admin, but you are the last active admin "
    "here: make someone else an admin first (People), then sign in again."
)

# What sign-in with the provider cannot do without, once OIDC_RP_CLIENT_ID is set.
ENDPOINTS = (
    "OIDC_RP_CLIENT_SECRET",
    "OIDC_OP_AUTHORIZATION_ENDPOINT",
    "OIDC_OP_TOKEN_ENDPOINT",
    "OIDC_OP_USER_ENDPOINT",
    "OIDC_OP_JWKS_ENDPOINT",
)


def group_roles(entries: Iterable[str], default: str) -> dict[str, str]:
    """OIDC_GROUP_ROLES (GROUP=ROLE entries) as a dict, each role and `default` checked."""
    mapping = {}
    for entry in entries:
        group, equals, role = entry.rpartition("=")
        if not equals or not group.strip() or not role.strip():
            raise ImproperlyConfigured(f"OIDC_GROUP_ROLES: each entry is GROUP=ROLE, not {entry!r}")
        mapping[group.strip()] = role.strip()
    unknown = sorted({*mapping.values(), *([default] if default else [])} - {*ROLE_PERMISSIONS})
    if unknown:
        raise ImproperlyConfigured(
            f"OIDC_GROUP_ROLES or OIDC_DEFAULT_ROLE name no role {', '.join(unknown)} "
            f"(roles: {', '.join(ROLE_STRENGTH)})"
        )
    return mapping


def configuration_checked() -> dict[str, str]:
    """The group mapping, once every setting sign-in with the provider needs is there."""
    unset = [name for name in ENDPOINTS if not getattr(settings, name)]
    if unset:
        raise ImproperlyConfigured(f"OIDC_RP_CLIENT_ID is set: set {', '.join(unset)} too")
    return group_roles(settings.OIDC_GROUP_ROLES, settings.OIDC_DEFAULT_ROLE)


def identity_provider_check(**_kwargs: Any) -> list[checks.CheckMessage]:
    """`manage.py check` (and every start of the web) says what sign-in with the provider
    lacks, before anybody tries it."""
    if not settings.OIDC_ENABLED:
        return []
    try:
        configuration_checked()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="reviewapp.E101")]
    return []


def role_of_groups(groups: Iterable[str], group_roles: Mapping[str, str], default: str) -> str:
    """The strongest role any of `groups` maps to; `default` ("" refuses) when none does."""
    roles = {group_roles[group] for group in groups if group in group_roles}
    return max(roles, key=ROLE_STRENGTH.index) if roles else default


def groups_claim(claims: Mapping[str, Any]) -> list[str]:
    """The groups claim as a list (a provider may send one group as a string)."""
    value = claims.get(settings.OIDC_ROLE_CLAIM) or []
    return [value] if isinstance(value, str) else [str(group) for group in value]


class IdentityProviderBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's code flow, with accounts found by name and roles from groups."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.group_roles = configuration_checked()

    def authenticate(self, request: Any, **kwargs: Any) -> Any:
        # Only the callback passes a nonce: a password sign-in (or a stray ?code= on the
        # sign-in page) never makes the app call the provider.
        if request is None or "nonce" not in kwargs:
            return None
        try:
            return super().authenticate(request, **kwargs)
        except (
            requests.RequestException,
            jwt.PyJWTError,
            ValueError,
            KeyError,
            SuspiciousOperation,
        ) as exc:
            log.warning("sign-in with the identity provider failed: %s", type(exc).__name__)
            self._refuse(NO_ANSWER)
            return None

    def verify_token(self, token: str, **kwargs: Any) -> Any:
        payload = super().verify_token(token, **kwargs)
        # The library leaves the audience unchecked: a token made for another client is not ours.
        audience = payload.get("aud")
        audiences = [audience] if isinstance(audience, str) else list(audience or [])
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("the ID token was made for another client")
        return payload

    def verify_claims(self, claims: Mapping[str, Any]) -> bool:
        return bool(self._username(claims))

    def filter_users_by_claims(self, claims: Mapping[str, Any]) -> Any:
        return self.UserModel.objects.filter(username=self._username(claims))

    def create_user(self, claims: Mapping[str, Any]) -> Any:
        return self._signed_in(None, claims)

    def update_user(self, user: Any, claims: Mapping[str, Any]) -> Any:
        return self._signed_in(user, claims)

    def get_user(self, user_id: Any) -> Any:
        # As Django's own backend: a deactivated account's sessions end.
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None

    def _username(self, claims: Mapping[str, Any]) -> str:
        name = str(claims.get(settings.OIDC_USERNAME_CLAIM) or "").strip()
        return self.UserModel.normalize_username(name)

    def _refuse(self, reason: str) -> None:
        if getattr(self, "request", None) is not None:
            self.request.identity_provider_refusal = reason

    def _signed_in(self, user: Any, claims: Mapping[str, Any]) -> Any:
        """The account of these claims with the role its groups give now; None: refused."""
        name = self._username(claims)
        if user is not None and not user.is_active:
            log.warning("identity provider sign-in refused: account %s is deactivated", user.pk)
            self._refuse(DEACTIVATED)
            return None
        superuser = bool(user is not None and user.is_superuser)
        groups = groups_claim(claims)
        role = role_of_groups(groups, self.group_roles, settings.OIDC_DEFAULT_ROLE)
        try:
            if not role:
                if user is not None:
                    account_role_set(name, None, superuser=superuser)
                log.warning("identity provider sign-in refused: no mapped group (%d)", len(groups))
                self._refuse(NO_ROLE)
                return None
            return account_role_set(name, role, superuser=superuser)
        except LastAdminError:
            # The provider took the last admin's role away: the team would be left with no
            # one to manage it. The account stays as it is, and is not signed in.
            log.warning("identity provider sign-in refused: account %s is the last admin", name)
            self._refuse(LAST_ADMIN)
            return None
