import pytest

from reviewapp.engine import Normalizer, canonical
from reviewapp.engine.normalize import normalize_money


@pytest.mark.parametrize(
    ("value", "expected_amount"),
    [
        ({"amount": "12.50", "currency": "USD", "unit": "major"}, 1250),
        ({"amount": 12.5, "currency": "USD", "unit": "major"}, 1250),
        ({"amount": 1250, "currency": "USD", "unit": "minor"}, 1250),
        ({"amount": "1250", "currency": "JPY", "unit": "major"}, 1250),
        ({"amount": "1.250", "currency": "BHD", "unit": "major"}, 1250),
        ({"amount": 0.1, "currency": "EUR", "unit": "major"}, 10),
    ],
)
def test_money_compares_in_integer_minor_units(value, expected_amount):
    normalized = normalize_money(value)
    assert normalized["amount"] == expected_amount
    assert normalized["unit"] == "minor"


@pytest.mark.parametrize(
    "value",
    [
        {"amount": "12.50", "currency": "USD"},  # no unit
        {"amount": "12.50", "unit": "major"},  # no currency
        {"amount": "12.505", "currency": "USD", "unit": "major"},  # a fraction of a cent
        {"amount": "1.5", "currency": "JPY", "unit": "major"},  # yen has no minor unit
        {"amount": "12.50", "currency": "XYZ", "unit": "major"},  # unknown currency: no guess
        {"amount": "1e3", "currency": "USD", "unit": "major"},  # not a decimal string
        {"amount": True, "currency": "USD", "unit": "major"},
        "12.50 USD",
    ],
)
def test_money_compares_raw_when_converting_would_need_a_guess(value):
    assert normalize_money(value) == value


def test_money_never_guesses_the_unit_from_the_size_of_the_number():
    major = normalize_money({"amount": 1250, "currency": "USD", "unit": "major"})
    minor = normalize_money({"amount": 1250, "currency": "USD", "unit": "minor"})
    assert canonical(major) != canonical(minor)


def test_enum_folds_case_and_maps_aliases_by_folded_key():
    enum = Normalizer(kind="enum", case_insensitive=True, aliases={"erstattet": "refunded"})
    assert enum.normalize("ERSTATTET") == "refunded"
    assert enum.normalize("Refunded") == "refunded"
    assert enum.normalize(3) == 3
    strict = Normalizer(kind="enum", aliases={"Erstattet": "refunded"})
    assert strict.normalize("erstattet") == "erstattet"
    assert strict.normalize("Erstattet") == "refunded"


def test_text_trims_and_optionally_collapses_and_folds():
    assert Normalizer(kind="text").normalize("  Main  St ") == "Main  St"
    folded = Normalizer(kind="text", collapse_whitespace=True, case_insensitive=True)
    assert folded.normalize(" 1  Main\tSt\n") == "1 main st"


def test_canonical_is_json_equality():
    assert canonical(1) == canonical(1.0)
    assert canonical(True) != canonical(1)
    assert canonical({"a": [1, {"b": None}]}) == canonical({"a": [1.0, {"b": None}]})
    assert canonical("1") != canonical(1)
    assert canonical([1, 2]) != canonical([2, 1])
