"""Real receivers the alert tests send to: a webhook (http.server in a thread, on a free
port) that checks each request's signature with the shared secret and answers with the
statuses it is given; an SMTP server (aiosmtpd) that keeps every message."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SECRET = "a-shared-secret-of-the-tests"


@dataclass
class Received:
    body: dict[str, Any]
    headers: dict[str, str]
    signed: bool
    answered: int


@dataclass
class Webhook:
    url: str
    # Statuses to answer, in order; 200 once they are spent.
    statuses: list[int] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)


def signature_valid(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """What a receiver does: HMAC-SHA256 of `TIMESTAMP.BODY` compared, in constant time."""
    timestamp = headers.get("X-Crosscheck-Timestamp", "")
    wanted = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    given = headers.get("X-Crosscheck-Signature", "")
    return bool(timestamp) and hmac.compare_digest("sha256=" + wanted.hexdigest(), given)


@contextmanager
def webhook_receiver(*statuses: int, secret: str = SECRET) -> Iterator[Webhook]:
    hook = Webhook(url="", statuses=list(statuses))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            headers = dict(self.headers.items())
            signed = signature_valid(secret, headers, body)
            status = (hook.statuses.pop(0) if hook.statuses else 200) if signed else 401
            hook.received.append(Received(json.loads(body), headers, signed, status))
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hook.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/crosscheck"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def smtp_server() -> Iterator[tuple[int, list[Message]]]:
    """A real SMTP server on a free port: (its port, the messages it took)."""
    from aiosmtpd.controller import Controller

    messages: list[Message] = []

    class Keep:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
            message = message_from_bytes(envelope.original_content or envelope.content)
            message["X-Envelope-To"] = ", ".join(envelope.rcpt_tos)
            messages.append(message)
            return "250 Message accepted for delivery"

    port = free_port()
    controller = Controller(Keep(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port, messages
    finally:
        controller.stop()
