from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewapp.engine import Normalizer, canonical
from reviewapp.engine.normalize import (
    CURRENCY_EXPONENTS,
    _decimal_amount,
    json_equal,
    normalize_money,
)


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


# --- the judge's fast comparisons against their definitions ---------------------------

json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.sampled_from([0, 1, -1, 2, 0.0, 1.0, -0.0, 2.5, "1", "a", "A", ""])
    | st.integers()
    | st.floats(allow_nan=False),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(json_like, json_like)
def test_json_equal_is_equality_of_canonical_forms(a, b):
    assert json_equal(a, b) == (canonical(a) == canonical(b))
    assert json_equal(a, a)


@given(json_like)
def test_json_equal_tells_booleans_from_numbers_at_any_depth(value):
    assert not json_equal([value, True], [value, 1])
    assert json_equal({"a": [1, value]}, {"a": (1.0, value)})


def money_by_decimal(value):
    """The definition: every amount through Decimal, exactly (no rounding to 28 digits)."""
    if not isinstance(value, dict):
        return value
    currency, unit = value.get("currency"), value.get("unit")
    if not isinstance(currency, str) or unit not in ("major", "minor"):
        return value
    exponent = CURRENCY_EXPONENTS.get(currency.upper())
    amount = _decimal_amount(value.get("amount"))
    if exponent is None or amount is None:
        return value
    exact = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
    minor = amount.scaleb(exponent, context=exact) if unit == "major" else amount
    if minor != minor.to_integral_value():
        return value
    return {"amount": int(minor), "currency": currency.upper(), "unit": "minor"}


amounts = st.one_of(
    st.integers(-(10**30), 10**30),
    st.decimals(allow_nan=False, allow_infinity=False, places=5).map(str),
    st.from_regex(r"\A-?0*[0-9]{1,25}(\.[0-9]{1,8})?\Z"),
    st.sampled_from(["", "1.", ".5", "1e3", " 12.50 ", "-0.00", "٣.٥٠", "1" * 1200, True]),
    st.sampled_from(["9" * 4100 + ".5", "7" * 4100, 10**40 + 1, "1" * 30 + ".25"]),
    st.floats(allow_nan=False, allow_infinity=True),
)


@given(
    amounts,
    st.sampled_from(["USD", "jpy", "BHD", "CLF", "XYZ"]),
    st.sampled_from(["major", "minor"]),
)
def test_money_in_integer_arithmetic_matches_the_decimal_definition(amount, currency, unit):
    value = {"amount": amount, "currency": currency, "unit": unit}
    assert normalize_money(value) == money_by_decimal(value)


def test_money_amounts_that_integer_arithmetic_must_scale_exactly():
    cases = {
        "0.10": {"amount": 10, "currency": "USD", "unit": "minor"},
        "-12.5": {"amount": -1250, "currency": "USD", "unit": "minor"},
        "7.000": {"amount": 700, "currency": "USD", "unit": "minor"},
        "7.001": None,
        "00012": {"amount": 1200, "currency": "USD", "unit": "minor"},
    }
    for amount, expected in cases.items():
        value = {"amount": amount, "currency": "USD", "unit": "major"}
        assert normalize_money(value) == (expected or value)
    assert Decimal("7.001").scaleb(2) != 700  # the definition refuses a sub-minor amount too


def test_money_amounts_past_28_digits_are_not_rounded():
    big = {"amount": 10**40 + 1, "currency": "USD", "unit": "major"}
    assert normalize_money(big)["amount"] == (10**40 + 1) * 100
    near = {"amount": str(10**40 + 2), "currency": "USD", "unit": "major"}
    assert normalize_money(near)["amount"] != normalize_money(big)["amount"]
