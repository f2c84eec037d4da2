"""Settings from the environment: typed, unset or empty is the default, and a value that
is not what its variable must hold stops the start naming the variable."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from reviewapp.environment import env_bool, env_float, env_int, env_list


@pytest.mark.parametrize(
    ("read", "raw", "expected"),
    [
        (env_bool, "yes", True),
        (env_bool, "OFF", False),
        (env_int, "42", 42),
        (env_float, "0.25", 0.25),
        (env_list, " a, b ,,c ", ["a", "b", "c"]),
    ],
)
def test_a_value_is_read_as_its_type(monkeypatch, read, raw, expected):
    monkeypatch.setenv("CROSSCHECK_TEST_SETTING", raw)
    assert read("CROSSCHECK_TEST_SETTING", None) == expected


@pytest.mark.parametrize("raw", [None, ""])
def test_unset_or_empty_is_the_default(monkeypatch, raw):
    if raw is None:
        monkeypatch.delenv("CROSSCHECK_TEST_SETTING", raising=False)
    else:
        monkeypatch.setenv("CROSSCHECK_TEST_SETTING", raw)
    assert env_int("CROSSCHECK_TEST_SETTING", 7) == 7
    assert env_list("CROSSCHECK_TEST_SETTING", ["x"]) == ["x"]


@pytest.mark.parametrize(
    ("read", "raw", "what"),
    [
        (env_bool, "maybe", "a boolean"),
        (env_int, "4.5", "an integer"),
        (env_float, "x", "a number"),
    ],
)
def test_a_wrong_value_stops_the_start_naming_the_variable(monkeypatch, read, raw, what):
    monkeypatch.setenv("CROSSCHECK_TEST_SETTING", raw)
    with pytest.raises(ImproperlyConfigured, match=f"CROSSCHECK_TEST_SETTING must be {what}"):
        read("CROSSCHECK_TEST_SETTING", None)
