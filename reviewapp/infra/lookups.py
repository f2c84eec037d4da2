"""`field__any=[...]`: the field equals one element of a list sent as one array parameter
(`= ANY(%s)`). Django's `__in` sends one placeholder per element, and for the thousands of
ids that judging and ingest look up at once, building that statement costs more than
running it."""

from __future__ import annotations

from typing import Any

from django.db.models import Field, ForeignObject, Lookup


@ForeignObject.register_lookup
@Field.register_lookup
class AnyOf(Lookup):
    lookup_name = "any"
    # The list is the parameter as it is: psycopg sends it as an array of its elements.
    prepare_rhs = False

    def get_db_prep_lookup(self, value: Any, connection: Any) -> tuple[str, list[Any]]:
        return "%s", [list(value)]

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} = ANY({rhs})", [*lhs_params, *rhs_params]
