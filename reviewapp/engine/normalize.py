"""Field normalizers (spec/policy.md): applied to compare values, never to stored raw values.

Every normalizer is idempotent: normalizing a normalized value changes nothing. A value a
normalizer does not understand is returned unchanged and so compared raw.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, InvalidOperation
from typing import Any

# ISO 4217 minor-unit exponents. Codes not listed here are unknown: no guess is made.
_EXPONENT_0 = "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF"
_EXPONENT_3 = "BHD IQD JOD KWD LYD OMR TND"
_EXPONENT_4 = "CLF UYW"
_EXPONENT_2 = (
    "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BOV BRL BSD BTN BWP "
    "BYN BZD CAD CDF CHE CHF CHW CNY COP COU CRC CUC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR "
    "FJD FKP GBP GEL GHS GIP GMD GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW "
    "KYD KZT LAK LBP LKR LRD LSL MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN "
    "NAD NGN NIO NOK NPR NZD PAB PEN PGK PHP PKR PLN QAR RON RSD RUB SAR SBD SCR SDG SEK SGD "
    "SHP SLE SLL SOS SRD SSP STN SVC SYP SZL THB TJS TMT TOP TRY TTD TWD TZS UAH USD USN UYU "
    "UZS VED VES WST XCD XCG YER ZAR ZMW ZWG ZWL"
)
CURRENCY_EXPONENTS: Mapping[str, int] = {
    code: exponent
    for codes, exponent in ((_EXPONENT_0, 0), (_EXPONENT_2, 2), (_EXPONENT_3, 3), (_EXPONENT_4, 4))
    for code in codes.split()
}
_DECIMAL_STRING = re.compile(r"-?\d+(?:\.\d+)?")
# Scaling an amount never rounds it: two amounts differing in their 29th digit differ.
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
NORMALIZER_KINDS = ("none", "enum", "text", "money")


@dataclass(frozen=True, slots=True)
class Normalizer:
    """One field's normalizer; `aliases` keys are already case-folded when case-insensitive."""

    kind: str = "none"
    case_insensitive: bool = False
    collapse_whitespace: bool = False
    aliases: Mapping[str, str] = field(default_factory=dict)

    def normalize(self, value: Any) -> Any:
        return self.function()(value)

    def function(self) -> Callable[[Any], Any]:
        """`normalize` for this kind, chosen once: what the judge calls value by value."""
        if self.kind == "none":
            return _unchanged
        if self.kind == "enum":
            return self._enum
        if self.kind == "text":
            return self._text
        return normalize_money

    def _enum(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        key = value.casefold() if self.case_insensitive else value
        return self.aliases.get(key, key)

    def _text(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        text = " ".join(value.split()) if self.collapse_whitespace else value.strip()
        return text.casefold() if self.case_insensitive else text


def _unchanged(value: Any) -> Any:
    return value


def resolve_aliases(aliases: Mapping[str, str], case_insensitive: bool) -> dict[str, str]:
    """Flatten alias chains (a -> b -> c becomes a -> c) so that enum is idempotent.

    Raises ValueError naming the alias on a cycle."""
    fold = str.casefold if case_insensitive else (lambda s: s)
    direct = {fold(k): fold(v) for k, v in aliases.items()}
    resolved = {}
    for start in direct:
        seen = {start}
        target = direct[start]
        while target in direct and direct[target] != target:
            if target in seen:
                raise ValueError(f'alias "{start}" leads to a cycle')
            seen.add(target)
            target = direct[target]
        resolved[start] = target
    return resolved


def _decimal_amount(amount: Any) -> Decimal | None:
    if isinstance(amount, bool):
        return None
    if isinstance(amount, int):
        return Decimal(amount)
    if isinstance(amount, float):
        number = Decimal(repr(amount))
    elif isinstance(amount, str) and _DECIMAL_STRING.fullmatch(amount.strip()):
        try:
            number = Decimal(amount.strip())
        except InvalidOperation:
            return None
    else:
        return None
    return number if number.is_finite() else None


def _minor_units(amount: object, exponent: int) -> int | None:
    """`amount` times 10**exponent as an exact integer, None when it is not a number or
    leaves a fraction of a minor unit. Integers and decimal strings are scaled in integer
    arithmetic; a float, or a string too long for int(), through Decimal without rounding.

    `exponent` is never negative. (Type checkers read int ** int as Any, since a negative
    power is a float: the int annotations below say what these powers are.)"""
    if type(amount) is int:
        scale: int = 10**exponent
        return amount * scale
    if type(amount) is str and len(amount) < 4000:
        # _DECIMAL_STRING's sign, whole and fraction, by str methods: isdecimal() is exactly
        # the regex's \d (Unicode category Nd), and false for "" as \d+ needs a digit.
        text = amount.strip()
        negative = text.startswith("-")
        whole, dot, fraction = (text[1:] if negative else text).partition(".")
        if not whole.isdecimal() or (dot and not fraction.isdecimal()):
            return None
        digits = whole + fraction
        surplus = len(fraction) - exponent  # digits past the minor unit
        minor: int
        if surplus <= 0:
            minor = int(digits) * 10**-surplus
        elif digits[-surplus:].strip("0"):
            return None
        else:
            minor = int(digits[:-surplus])
        return -minor if negative else minor
    number = _decimal_amount(amount)
    if number is None:
        return None
    scaled = number.scaleb(exponent, context=_EXACT)
    return int(scaled) if scaled == scaled.to_integral_value() else None


def normalize_money(value: Any) -> Any:
    """{"amount", "currency", "unit"} to integer minor units, or the value unchanged when
    converting would need a guess (no currency, no unit, unknown currency, sub-minor)."""
    if not isinstance(value, dict):
        return value
    currency, unit = value.get("currency"), value.get("unit")
    if not isinstance(currency, str) or unit not in ("major", "minor"):
        return value
    code = currency.upper()
    exponent = CURRENCY_EXPONENTS.get(code)
    if exponent is None:
        return value
    minor = _minor_units(value.get("amount"), exponent if unit == "major" else 0)
    if minor is None:
        return value
    return {"amount": minor, "currency": code, "unit": "minor"}


def canonical(value: object) -> Hashable:
    """A hashable form in which two JSON values are equal exactly when they are JSON-equal
    (1 equals 1.0; true never equals 1; object key order does not matter)."""
    kind = type(value)
    if kind is str or value is None:
        return value
    if kind is bool:
        return ("bool", value)
    if kind is int or kind is float:
        return value
    # Containers are tested as type(value), not kind: type checkers narrow only the former.
    if type(value) is list or type(value) is tuple:
        return ("list", tuple(canonical(item) for item in value))
    if type(value) is dict:
        return ("object", frozenset((k, canonical(v)) for k, v in value.items()))
    return ("other", repr(value))


def json_equal(a: object, b: object) -> bool:
    """canonical(a) == canonical(b), without building either: the judge's comparisons.

    Exact types, as canonical tests them; containers as type(a) and type(b), which type
    checkers narrow (and which are cheaper than __class__)."""
    kind, other = type(a), type(b)
    if kind is str:
        return other is str and a == b
    if kind is bool or other is bool:
        return kind is other and a == b
    if type(a) is dict:
        if type(b) is not dict or len(a) != len(b):
            return False
        for key, item in a.items():
            if key not in b:
                return False
            other_item = b[key]
            item_kind = type(item)
            # A string, or an integer beside an integer, compared as json_equal would: most
            # members of an object are one of these, and this saves a call each.
            if item_kind is str or (item_kind is int and type(other_item) is int):
                if type(other_item) is not item_kind or item != other_item:
                    return False
            elif not json_equal(item, other_item):
                return False
        return True
    if type(a) is list or type(a) is tuple:
        if (type(b) is not list and type(b) is not tuple) or len(a) != len(b):
            return False
        return all(map(json_equal, a, b))
    if a is None or kind is int or kind is float:
        if b is None or other is int or other is float:
            return a == b
        return False
    return canonical(a) == canonical(b)
