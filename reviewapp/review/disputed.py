"""What a conflict ticket keeps of what it disputes (Ticket.disputed), for its queue row and
its page to show without reading the run: the source and the value of each observation the
conflict names, and for a partial result the errors that make it a conflict. Two sources
that both say `refunded` are in conflict only because of such an error: shown without it,
"refunded vs refunded" says nothing.

Kept as a list, one entry an observation: [source, value], and [source, value, errors] where
a partial result's observation carries errors, each [code, field] (field null: the error
names none, so it concerns every field). Tickets opened before errors were kept have
[source, value] entries only."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from reviewapp.engine import ABSENT, Observation, Policy, partial_result_errors

SHOWN_CHARACTERS = 60


def value_text(value: Any) -> str:
    """A disputed value as the queue row shows it: a string as itself, anything else as
    JSON, shortened."""
    if value is ABSENT:
        text = "(absent)"
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    return _shortened(text)


def _shortened(text: str) -> str:
    limit = SHOWN_CHARACTERS
    return text if len(text) <= limit else text[: limit - 1] + "…"


def disputed_values(
    policy: Policy, field: str, observations: list[Observation], *, partial: bool
) -> list[list[Any]]:
    """What a ticket keeps of the observations a conflict on `field` names, in the evidence's
    order (the module's docstring says how); a `partial` result's errors are those that make
    it one under `policy` (engine.partial_result_errors)."""
    field_policy = policy.field_policy(field)
    kept: list[list[Any]] = []
    for observation in observations:
        entry: list[Any] = [observation.source, value_text(observation.value_for(field))]
        errors = partial_result_errors(observation, field_policy) if partial else ()
        if errors:
            entry.append(
                [
                    [
                        None if e.code is None else _shortened(e.code),
                        e.field and _shortened(e.field),
                    ]
                    for e in errors
                ]
            )
        kept.append(entry)
    return kept


@dataclass(frozen=True)
class DisputedSide:
    source: str
    value: str
    errors: str  # the errors that make it a partial result, as one line; "" for none


def _error_text(code: str | None, field: str | None) -> str:
    said = "an error without a code" if code is None else code
    return f"{said} on {field}" if field else said


def disputed_sides(kept: Iterable[list[Any]] | None) -> list[DisputedSide]:
    """What a ticket keeps (Ticket.disputed), side by side, to show."""
    sides = []
    for entry in kept or ():
        source, value, *rest = entry
        errors = ", ".join(_error_text(code, field) for code, field in (rest[0] if rest else ()))
        sides.append(DisputedSide(source, value, errors))
    return sides


def sides_title(sides: list[DisputedSide]) -> str:
    """The sides in one line, each value with its source and errors: a queue row's title."""
    return " vs ".join(
        f"{side.value} ({side.source}{': ' + side.errors if side.errors else ''})" for side in sides
    )
