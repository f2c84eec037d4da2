"""Fixtures for fault tests: a live stack on the test database, and a signed-in client."""

from __future__ import annotations

import http.cookiejar
import os
import re
import urllib.parse
import urllib.request

import pytest
from django.db import connection

from tests.reliability.stack import Stack


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/reliability/" in str(item.fspath):
            item.add_marker(pytest.mark.reliability)


@pytest.fixture
def stack(django_db_blocker, tmp_path):
    """A whole stack per test: faults leave processes in states no other test should see.
    It runs the shipped defaults (reconciler period, stall time, leases), as production
    does: the recovery the tests measure is the one a user gets."""
    assert os.environ.get("REDIS_URL"), "fault tests need the services scripts/test starts"
    with django_db_blocker.unblock():
        database = connection.settings_dict["NAME"]
    base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    live = Stack(database_url=f"{base}/{database}", workdir=tmp_path / "stack")
    try:
        yield live.start()
    finally:
        live.stop()


class Browser:
    """A cookie-keeping HTTP client that signs in like a person, CSRF token included."""

    def __init__(self, stack: Stack):
        self.stack = stack
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    @staticmethod
    def encode(data: dict) -> bytes:
        return urllib.parse.urlencode(data).encode()

    def status(self, path: str, data: dict | None = None) -> int:
        body = None
        if data is not None:
            body = self.encode({"csrfmiddlewaretoken": self.csrf(), **data})
        return self.stack.status(
            path,
            data=body,
            headers={"Referer": self.stack.url(path)},
            opener=self.opener,
        )

    def csrf(self) -> str:
        page = self.stack.request("/login/", opener=self.opener).read().decode()
        return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)

    def sign_in(self, username: str, password: str) -> int:
        return self.status("/login/", {"username": username, "password": password})
