"""Login, the base layout and its security headers."""

import re

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_every_page_but_login_needs_a_login(client):
    response = client.get(reverse("dashboard"))
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next=/"
    assert client.get(reverse("login")).status_code == 200


def test_logging_in_lands_on_the_dashboard(client, reviewer):
    response = client.post(
        reverse("login"), {"username": "rita", "password": "pw-rita-123"}, follow=True
    )
    assert response.redirect_chain[-1][0] == reverse("dashboard")
    assert b"Dashboard" in response.content
    assert b"rita" in response.content


def test_a_wrong_password_is_refused(client, reviewer):
    response = client.post(reverse("login"), {"username": "rita", "password": "wrong"})
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content


def test_the_layout_wires_htmx_locally_with_the_csrf_header(client, reviewer):
    client.force_login(reviewer)
    body = client.get(reverse("dashboard")).content.decode()
    assert '<script src="/static/django_htmx/htmx-2.min.js"' in body
    assert 'hx-headers=\'{"x-csrftoken": "' in body
    # No script from anywhere but this server (a random nonce may spell "cdn": not a URL).
    sources = re.findall(r'<script[^>]*\ssrc="([^"]*)"', body)
    assert sources and all(source.startswith("/static/") for source in sources)


def test_responses_carry_a_content_security_policy(client):
    response = client.get(reverse("login"))
    policy = response["Content-Security-Policy"]
    assert "default-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "script-src 'self' 'nonce-" in policy
    assert response["X-Frame-Options"] == "DENY"


def test_logout_needs_a_post(client, reviewer):
    client.force_login(reviewer)
    assert client.get(reverse("logout")).status_code == 405
    assert client.post(reverse("logout")).status_code == 302
    assert client.get(reverse("dashboard")).status_code == 302


def test_the_dashboard_sums_up_what_was_judged(client, reviewer, tmp_path):
    import shutil

    from reviewapp.ingest.pipeline import ingest_file
    from tests.paths import SPEC

    client.force_login(reviewer)
    assert "Nothing has been ingested yet" in client.get(reverse("dashboard")).content.decode()
    # Wherever the file lies, however deep: a path longer than the page shows, and than a
    # batch keeps, still shows the file's own name.
    deep = tmp_path.joinpath(*["folder-" + "x" * 40] * 6) / "order-status.jsonl"
    deep.parent.mkdir(parents=True)
    shutil.copy(SPEC / "order-status.jsonl", deep)
    assert len(str(deep)) > 255
    ingest_file(deep, channel="cli")
    body = client.get(reverse("dashboard")).content.decode()
    assert "<dt>Runs judged</dt><dd>5</dd>" in body
    # Under the default policy, stale-search and run-conflict-1 both acted on a conflict.
    assert '<dt>Acted on a conflict</dt><dd class="error">2</dd>' in body
    assert "Nothing has been ingested yet" not in body
    assert f">…{'x' * 40}/order-status.jsonl</a>" in body


def test_the_generated_secret_key_is_private_from_the_start(tmp_path, monkeypatch):
    import stat

    from reviewapp import settings as app_settings

    monkeypatch.setattr(app_settings, "VAR_DIR", tmp_path)
    key = app_settings.local_secret_key()
    path = tmp_path / "secret-key"
    assert len(key) > 50 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert app_settings.local_secret_key() == key  # kept, not made again


def test_a_secret_key_file_left_empty_is_refused_plainly(tmp_path, monkeypatch):
    import time

    from django.core.exceptions import ImproperlyConfigured

    from reviewapp import settings as app_settings

    monkeypatch.setattr(app_settings, "VAR_DIR", tmp_path)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    (tmp_path / "secret-key").write_text("")
    with pytest.raises(ImproperlyConfigured, match="is empty: delete it"):
        app_settings.local_secret_key()


def test_https_only_deployments_can_tell_browsers_so(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "HSTS_SECONDS": "31536000", "CROSSCHECK_VAR_DIR": str(tmp_path)}
    env["DJANGO_SETTINGS_MODULE"] = "reviewapp.settings"
    read = "import django; django.setup(); from django.conf import settings; "
    read += "print(settings.SECURE_HSTS_SECONDS)"
    out = subprocess.run(
        [sys.executable, "-c", read], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "31536000"
