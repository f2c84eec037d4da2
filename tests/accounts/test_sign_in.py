"""Failed sign-ins are throttled per account and per client address."""

import time

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db
LOCKED = b"Too many failed sign-ins"


def sign_in(client: Client, username: str, password: str, address: str = "10.0.0.1"):
    return client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address
    )


def is_signed_in(client: Client) -> bool:
    return client.get(reverse("dashboard")).status_code == 200


def test_after_five_wrong_passwords_even_the_right_one_is_refused(client, reviewer):
    for _ in range(5):
        assert b"Please enter a correct" in sign_in(client, "rita", "guess").content
    response = sign_in(client, "rita", "pw-rita-123")
    assert response.status_code == 200
    assert LOCKED in response.content
    assert b"Try again in 15 minutes" in response.content
    assert not is_signed_in(client)


def test_the_lockout_is_per_username_whatever_its_case(client, reviewer, second_reviewer):
    for _ in range(5):
        sign_in(client, "RITA", "guess")
    assert LOCKED in sign_in(client, "rita", "pw-rita-123").content
    assert sign_in(client, "ravi", "pw-ravi-123").status_code == 302


def test_a_successful_sign_in_clears_the_count(client, reviewer):
    for _ in range(4):
        sign_in(client, "rita", "guess")
    assert sign_in(client, "rita", "pw-rita-123").status_code == 302
    client.logout()
    for _ in range(4):
        sign_in(client, "rita", "guess")
    assert sign_in(client, "rita", "pw-rita-123").status_code == 302


def test_one_address_guessing_many_usernames_is_locked_out_but_others_are_not(client, reviewer):
    for i in range(25):
        sign_in(client, f"nobody-{i}", "guess", address="10.6.6.6")
    assert LOCKED in sign_in(client, "rita", "pw-rita-123", address="10.6.6.6").content
    assert sign_in(Client(), "rita", "pw-rita-123", address="10.0.0.2").status_code == 302


def test_the_lockout_ends_when_its_window_has_passed(client, reviewer, monkeypatch, settings):
    for _ in range(5):
        sign_in(client, "rita", "guess")
    assert LOCKED in sign_in(client, "rita", "pw-rita-123").content
    later = time.time() + settings.SIGN_IN_LOCKOUT_SECONDS + 1
    monkeypatch.setattr(time, "time", lambda: later)
    assert sign_in(client, "rita", "pw-rita-123").status_code == 302


def test_guesses_sent_at_once_are_counted_before_any_password_is_checked(rf, settings):
    from reviewapp.accounts.sign_in import attempt_allowed

    request = rf.post("/login/", REMOTE_ADDR="10.0.0.9")
    allowed = [attempt_allowed(request, "rita") for _ in range(settings.SIGN_IN_MAX_FAILURES + 3)]
    assert allowed == [True] * settings.SIGN_IN_MAX_FAILURES + [False] * 3


def test_behind_a_proxy_the_address_is_the_one_the_proxy_saw(rf, settings):
    from reviewapp.accounts.sign_in import client_address

    request = rf.get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.7")
    assert client_address(request) == "10.0.0.1"
    settings.BEHIND_PROXY = True
    assert client_address(request) == "203.0.113.7"
