"""Security headers on every kind of response (matrix row 20): full pages, htmx fragments,
downloads, the API's JSON, the OpenAPI document and errors (400, 401, 403, 404, 405, 500)
all carry the CSP (frame-ancestors, object-src and base-uri 'none'), X-Frame-Options DENY,
nosniff, Referrer-Policy, COOP and Cache-Control no-store; HSTS over HTTPS."""

import pytest
from django.test import Client
from django.urls import reverse

from reviewapp.ingest.tokens import create_token

pytestmark = pytest.mark.django_db

EXPECTED = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def assert_secure(name: str, response) -> None:
    csp = response.get("Content-Security-Policy", "")
    for directive in (
        "frame-ancestors 'none'",
        "object-src 'none'",
        "base-uri 'none'",
        "default-src 'self'",
    ):
        assert directive in csp, (name, csp)
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, (name, csp)
    for header, value in EXPECTED.items():
        assert response.get(header) == value, (name, header, response.get(header))
    assert "no-store" in response.get("Cache-Control", ""), name
    assert response.get("Strict-Transport-Security", "").startswith(
        "max-age=31536000; includeSubDomains"
    ), name


def test_every_kind_of_response_carries_the_headers(client, reviewer, viewer, desk, settings):
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.ROOT_URLCONF = "tests.security.boom_urls"
    token = create_token(user=reviewer, name="headers")[1]
    ticket = desk["run-stale"]
    anonymous = Client(raise_request_exception=False)
    client.force_login(reviewer)
    viewing = Client()
    viewing.force_login(viewer)
    responses = {
        "page": client.get(reverse("ticket-queue"), secure=True),
        "htmx fragment": client.get(
            reverse("ticket-queue"),
            headers={"HX-Request": "true", "HX-Target": "queue-results"},
            secure=True,
        ),
        "download": client.get(reverse("ticket-handoff", args=[ticket.pk]), secure=True),
        "sign-in page": anonymous.get(reverse("login"), secure=True),
        "api 202": client.post(
            reverse("api-traces"),
            data=b'{"runId": "h", "type": "run_started"}\n',
            content_type="application/x-ndjson",
            headers={"Authorization": f"Bearer {token}"},
            secure=True,
        ),
        "api 401": anonymous.get(
            reverse("api-batch", args=["00000000-0000-0000-0000-000000000000"]), secure=True
        ),
        "api 400": client.post(
            reverse("api-traces"),
            data=b"",
            content_type="application/x-ndjson",
            headers={"Authorization": f"Bearer {token}"},
            secure=True,
        ),
        "openapi": anonymous.get(reverse("api-openapi"), secure=True),
        "403": viewing.post(reverse("ticket-claim", args=[ticket.pk]), secure=True),
        "404": client.get("/no/such/page/", secure=True),
        "405": client.get(reverse("ticket-claim", args=[ticket.pk]), secure=True),
        "500": anonymous.get("/boom/", secure=True),
        "api 404": anonymous.get("/api/v1/batches/null,null", secure=True),
        "api 405": anonymous.get(reverse("api-check"), secure=True),
        "api 500": anonymous.get("/api/v1/boom", secure=True),
    }
    assert responses["500"].status_code == 500
    assert responses["api 400"].status_code == 400
    for name, response in responses.items():
        assert_secure(name, response)
    # The API's errors are JSON, those Django answers itself too.
    for name in ("api 401", "api 400", "api 404", "api 405", "api 500"):
        assert responses[name]["Content-Type"] == "application/json", name
        assert responses[name].json()["error"], name
    assert responses["api 500"].json() == {"error": "internal server error"}


@pytest.mark.parametrize("path", ["css/app.css", "js/keys.js", "img/favicon.svg"])
def test_a_static_file_carries_them_too_but_may_be_kept(client, path, settings):
    """WhiteNoise answers static files before most middleware runs: the CSP and
    X-Frame-Options are set before it. A static file is cached (no no-store)."""
    settings.SECURE_HSTS_SECONDS = 31536000
    response = client.get(f"/static/{path}", secure=True)
    assert response.status_code == 200 and "max-age" in response["Cache-Control"]
    assert "no-store" not in response["Cache-Control"]
    response["Cache-Control"] = "no-store"  # all the rest is as every other response's
    assert_secure(path, response)


def test_a_csrf_refusal_carries_them_too(reviewer, desk, settings):
    settings.SECURE_HSTS_SECONDS = 31536000
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    response = client.post(reverse("ticket-claim", args=[desk["run-stale"].pk]), secure=True)
    assert response.status_code == 403
    assert_secure("csrf 403", response)
