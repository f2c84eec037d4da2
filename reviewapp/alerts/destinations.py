"""Where alerts go: a webhook (an http or https URL and a shared secret) or email
addresses, each subscribed to kinds of alert. A secret is kept encrypted (Fernet under
PROTECTED_VALUES_KEY) and never shown back.

A webhook's URL may not reach a link-local address (169.254.0.0/16, fe80::/10: where cloud
metadata services answer, with the machine's credentials) nor AWS's IPv6 metadata address,
checked when it is saved and again, on the addresses its name resolves to then, when an
alert is sent. Loopback and private addresses are allowed: a receiver on the same machine
(tests, development) or the local network is a legitimate destination."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from cryptography.fernet import Fernet
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction

from reviewapp.accounts.audit import audit_record
from reviewapp.alerts.kinds import KINDS
from reviewapp.models import AlertDestination

# The verb of the audit event a destination added or changed records (its host, never its
# secret, its URL's path, which may hold a token, nor its email addresses).
DESTINATION_CHANGED = "alerts.destination"

_REFUSED_NETWORKS = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("fd00:ec2::254/128"),
)
MAX_EMAILS = 20


class DestinationError(ValueError):
    """A destination that cannot be saved or reached as given; the message says why."""


def refused_address(address: str) -> bool:
    """Whether an IP address is one a webhook may not reach (link-local, metadata)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in _REFUSED_NETWORKS)


def webhook_url_check(url: str, *, resolve: bool) -> str:
    """The URL if a webhook may be sent to it, else DestinationError. With `resolve`, each
    address its host name resolves to now is checked too (a name unresolvable now fails)."""
    url = url.strip()
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise DestinationError(f"not a URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise DestinationError("a webhook URL starts with http:// or https://")
    host = parts.hostname
    if not host:
        raise DestinationError("a webhook URL names a host")
    if parts.username or parts.password:
        raise DestinationError("a webhook URL holds no user name or password (use the secret)")
    addresses = _literal(host)
    if addresses is None and resolve:
        try:
            found = socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            raise DestinationError(f"{host} does not resolve: {exc}") from None
        addresses = [str(info[4][0]) for info in found]
    for address in addresses or []:
        if refused_address(address):
            raise DestinationError(
                f"{host} is a link-local or metadata address ({address}): refused"
            )
    return url


def _literal(host: str) -> list[str] | None:
    try:
        return [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        return None


def email_list(text: str) -> list[str]:
    """The addresses of a text (one per line, or separated by commas), each valid."""
    addresses = [part.strip() for part in text.replace(",", "\n").splitlines() if part.strip()]
    if not addresses:
        raise DestinationError("give at least one email address")
    if len(addresses) > MAX_EMAILS:
        raise DestinationError(f"at most {MAX_EMAILS} addresses")
    for address in addresses:
        try:
            validate_email(address)
        except ValidationError:
            raise DestinationError(f"not an email address: {address}") from None
    return addresses


def kinds_checked(kinds: Iterable[str]) -> list[str]:
    chosen = list(dict.fromkeys(kinds))
    unknown = [kind for kind in chosen if kind not in KINDS]
    if unknown:
        raise DestinationError(f"no alert kind named {', '.join(unknown)}")
    return [kind for kind in KINDS if kind in chosen]


def _fernet() -> Fernet:
    return Fernet(settings.PROTECTED_VALUES_KEY)


def secret_of(destination: AlertDestination) -> bytes:
    """The destination's shared secret, decrypted (for signing only: never shown)."""
    if not destination.secret_encrypted:
        return b""
    return _fernet().decrypt(destination.secret_encrypted.encode("ascii"))


def destination_add(
    *,
    name: str,
    channel: str,
    url: str = "",
    secret: str = "",
    emails: str = "",
    kinds: Iterable[str] = (),
    user: Any = None,
) -> AlertDestination:
    """A new destination, checked: a webhook needs a URL allowed (resolve=False: a name
    resolves where the worker runs, checked again there) and a secret; email, addresses."""
    name = name.strip()
    if not name:
        raise DestinationError("name the destination")
    destination = AlertDestination(
        name=name[:100], channel=channel, kinds=kinds_checked(kinds), created_by=user
    )
    if channel == AlertDestination.Channel.WEBHOOK:
        destination.url = webhook_url_check(url, resolve=False)
        if len(secret) < 16:
            raise DestinationError("a webhook's shared secret has at least 16 characters")
        destination.secret_encrypted = _fernet().encrypt(secret.encode("utf-8")).decode("ascii")
    elif channel == AlertDestination.Channel.EMAIL:
        destination.emails = "\n".join(email_list(emails))
    else:
        raise DestinationError("a destination is a webhook or email")
    with transaction.atomic():
        destination.save()
        _audit(destination, user, "added")
    return destination


def _audit(destination: AlertDestination, user: Any, change: str, **data: Any) -> None:
    audit_record(
        actor=user,
        verb=DESTINATION_CHANGED,
        target=f"alert destination {destination.name}"[:200],
        change=change,
        destination=destination.pk,
        channel=destination.channel,
        host=urlsplit(destination.url).hostname or "",
        addresses=len(destination.emails.split()),
        kinds=destination.kinds,
        active=destination.active,
        **data,
    )


def destination_change(
    destination: AlertDestination,
    *,
    kinds: Iterable[str],
    active: bool,
    secret: str = "",
    user: Any = None,
) -> AlertDestination:
    """Its subscriptions and whether it is on; a new secret when one is given (the old one
    is never shown: it can only be replaced)."""
    destination.kinds = kinds_checked(kinds)
    destination.active = active
    fields = ["kinds", "active", "updated_at"]
    if secret:
        if destination.channel != AlertDestination.Channel.WEBHOOK:
            raise DestinationError("only a webhook has a secret")
        if len(secret) < 16:
            raise DestinationError("a webhook's shared secret has at least 16 characters")
        destination.secret_encrypted = _fernet().encrypt(secret.encode("utf-8")).decode("ascii")
        fields.append("secret_encrypted")
    with transaction.atomic():
        destination.save(update_fields=fields)
        _audit(destination, user, "changed", new_secret=bool(secret))
    return destination
