"""Stable tokens: one value, one token, whichever source spells it; a token reveals nothing."""

import pytest
from django.test import override_settings

from reviewapp.privacy.tokens import canonical, is_token, token_of


def test_the_same_value_spelt_two_ways_gives_one_token_under_its_rule():
    assert token_of(" Alice@Example.com ", "casefold") == token_of("alice@example.com", "casefold")
    assert token_of("4111 1111-1111 1111", "digits") == token_of("4111111111111111", "digits")
    assert token_of("Alice@Example.com") != token_of("alice@example.com")


def test_a_token_is_keyed_and_does_not_hold_the_value():
    token = token_of("order-123")
    assert is_token(token) and "order-123" not in token
    with override_settings(REDACTION_SECRET="another secret"):
        assert token_of("order-123") != token
    assert token_of("order-123", secret=b"x") != token


def test_values_that_are_not_text_are_tokenised_as_their_json():
    assert canonical({"b": 1, "a": 2}) == canonical({"a": 2, "b": 1})
    assert token_of(42) != token_of("42") and token_of(42, "digits") == token_of("42", "digits")


def test_an_unknown_canonicalisation_is_refused_by_name():
    with pytest.raises(ValueError, match="no canonicalisation named 'lower'"):
        canonical("x", "lower")
