"""What a policy blocks: one definition for the blocked counts (reports), the shadow
comparisons (replay) and the gate, in Python (a judgement in memory) and in SQL (stored
verdicts and findings).

An agent action is blocked when
- it was taken on an unresolved conflict: an unsafe verdict (spec/policy.md, "Unsafe": a
  conflict whose action is not null and not a safe action); the action is the verdict's;
- or it breaks a blocking trajectory check: each call a blocking finding blocked (the
  engine's Finding.blocked: the calls that broke the path as they were made, so neither a
  retried operation's first attempt nor the attempts within its budget) is a blocked
  action, the call's tool its action name. A finding stored before findings kept their
  blocked calls (Finding.blocked is NULL) blocks every call of its evidence, as then.

Every trajectory finding blocks (spec/policy.md, "Trajectory findings"): each says a call
of the agent's own broke the policy's path (a tool outside the allowlist, another
customer's entity, a mutation without its prerequisite, over its budget, retried without
an idempotency key or after an unknown outcome without a status check). The integrity
findings (duplicate ids, an orphan observation, an event body mismatch, an identity
mismatch in report-only mode, the agent's resolution disagreeing) say the trace or the
agent's reasoning needs a person's look: they route the run to review and block nothing.

A blocked item is identified within its run by (kind, entity, field, action, finding kind,
call): the same item under two policies is "unchanged", whatever its reason."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, fields
from datetime import date, timedelta
from typing import Any, overload
from urllib.parse import urlencode

from django.db import connection

from reviewapp.engine import Observation, Record, RunJudgement, ToolCall
from reviewapp.infra.days import Window, monday_of
from reviewapp.infra.storable_text import NUL
from reviewapp.models import Finding, Run, TraceLine, TraceRecord, Verdict

BLOCKING_FINDINGS = (
    "missing-prerequisite",
    "mutation-budget-exceeded",
    "out-of-scope-entity",
    "retry-after-unknown-outcome",
    "retry-without-idempotency-key",
    "tool-outside-allowlist",
)
VERDICT, FINDING = "verdict", "finding"


@dataclass(frozen=True, slots=True)
class Blocked:
    """One blocked action of a run's judgement."""

    kind: str  # VERDICT or FINDING
    reason: str  # the verdict's reason, or the finding's kind
    action: str  # the verdict's action, or the tool of the call
    field: str  # the verdict's field ("" for a finding)
    entity: str | None
    sources: str  # the sources of the verdict's evidence, sorted, comma-joined
    evidence: tuple[str, ...]  # observation ids, or the call id
    rule: str | None = None

    @property
    def call(self) -> str:
        return self.evidence[0] if self.kind == FINDING else ""

    @property
    def key(self) -> tuple[str, str | None, str, str, str, str]:
        finding_kind = self.reason if self.kind == FINDING else ""
        return (self.kind, self.entity, self.field, self.action, finding_kind, self.call)


def blocked_in(result: RunJudgement, records: Iterable[Record]) -> list[Blocked]:
    """The blocked actions of a judgement of these records (in line order)."""
    tools: dict[str, str] = {}
    sources: dict[str, str] = {}
    for record in records:
        if type(record) is ToolCall:
            tools.setdefault(record.tool_call_id, record.tool)
        elif type(record) is Observation:
            sources.setdefault(record.observation_id, record.source)
    found = [
        Blocked(
            VERDICT,
            verdict.reason or "",
            verdict.action or "",
            verdict.field,
            verdict.entity,
            ",".join(sorted({sources[i] for i in verdict.evidence if i in sources})),
            verdict.evidence,
            verdict.rule,
        )
        for verdict in result.verdicts
        if verdict.unsafe
    ]
    found.extend(
        Blocked(FINDING, finding.kind, tools.get(call, ""), "", None, "", (call,))
        for finding in result.findings
        if finding.kind in BLOCKING_FINDINGS
        for call in finding.blocked
    )
    return found


# Columns of blocked_items_sql, in order.
ITEM_COLUMNS = ("kind", "ref_id", "entity", "field", "action", "reason", "call", "sources")


def blocked_items_sql(judgements: str, passed: Sequence[str] = ()) -> str:
    """A SELECT of every blocked item of the judgements a table expression names (a CTE
    with the columns judgement_id and run_pk): those two, the `passed` columns of it, then
    ITEM_COLUMNS. No parameters: it can be used twice in one statement."""
    records = TraceRecord._meta.db_table
    extra = "".join(f", j.{column}" for column in passed)
    # Sorted and joined by commas; NULL when there are none.
    sources = (
        "(SELECT string_agg(s, ',' ORDER BY s) FROM ("
        f"SELECT DISTINCT o.source AS s FROM {records} o WHERE o.run_id = j.run_pk "
        "AND o.type = 'tool_observation' AND o.key IN "
        "(SELECT ev.value FROM jsonb_array_elements_text(v.evidence) AS ev)) listed)"
    )
    # A native call's document is its line's (models.TraceRecord.document): UTF-8, a byte
    # order mark it may open with left out, as ingest read it.
    # An expired line (privacy/retention.py) is empty bytes: NULL, not a JSON error.
    document = (
        "COALESCE(c.data, ltrim(convert_from(NULLIF(l.raw, ''::bytea), 'UTF8'), chr(65279))::jsonb)"
    )
    tool = (
        f"(SELECT ({document} ->> 'tool') FROM {records} c "
        f"JOIN {TraceLine._meta.db_table} l ON l.id = c.line_id WHERE c.run_id = j.run_pk "
        "AND c.type = 'tool_call' AND c.key = e.value ORDER BY c.id LIMIT 1)"
    )
    kinds = ", ".join(f"'{kind}'" for kind in BLOCKING_FINDINGS)
    return (
        f"SELECT j.judgement_id, j.run_pk{extra}, '{VERDICT}' AS kind, v.id AS ref_id, "
        "v.entity AS entity, v.field AS field, COALESCE(v.action, '') AS action, "
        f"COALESCE(v.reason, '') AS reason, '' AS call, COALESCE({sources}, '') AS sources "
        f"FROM {judgements} j JOIN {Verdict._meta.db_table} v ON v.judgement_id = j.judgement_id "
        "WHERE v.unsafe "
        f"UNION ALL SELECT j.judgement_id, j.run_pk{extra}, '{FINDING}', f.id, NULL, '', "
        f"COALESCE({tool}, ''), f.kind, e.value, '' "
        f"FROM {judgements} j JOIN {Finding._meta.db_table} f ON f.judgement_id = j.judgement_id "
        "CROSS JOIN jsonb_array_elements_text(COALESCE(f.blocked, f.evidence)) AS e "
        f"WHERE f.kind IN ({kinds})"
    )


def placeholders(count: int) -> str:
    return ", ".join(["%s"] * count)


# What blocked items are counted by, besides their day and week.
DIMENSIONS = ("action", "field", "sources", "agent", "reason")


@dataclass(frozen=True)
class ItemFilter:
    """Which blocked items a drill-down shows: a value per dimension (None: any; "" is a
    value: no field, no action), a day or a week (its Monday)."""

    action: str | None = None
    field: str | None = None
    sources: str | None = None
    agent: str | None = None
    reason: str | None = None
    day: date | None = None
    week: date | None = None
    run: int | None = None  # one run's primary key

    @classmethod
    def read(cls, values: Mapping[str, str]) -> ItemFilter:
        """From a query string: a dimension present is a filter, even empty; a day, week
        or run that cannot be read is ignored, and so is a value holding a NUL (no stored
        value holds one, and PostgreSQL refuses it in a query), as the queue's filters do."""
        found: dict[str, Any] = {
            name: value
            for name in DIMENSIONS
            if (value := values.get(name)) is not None and NUL not in value
        }
        run = values.get("run", "")
        if run.isascii() and run.isdecimal() and len(run) < 19:
            found["run"] = int(run)
        for name in ("day", "week"):
            with suppress(ValueError):
                found[name] = date.fromisoformat(values.get(name, ""))
        return cls(**found)

    def __post_init__(self) -> None:
        if self.week is not None:  # a week is named by its Monday
            object.__setattr__(self, "week", monday_of(self.week))

    def where(self, window: Window, started_at: str = "started_at") -> tuple[str, list[Any]]:
        """An SQL condition over blocked items (with their run's started_at) and its
        parameters: inside the window, and matching every filter."""
        start, end = window.start, window.end
        for narrower in self._days():
            start, end = max(start, narrower.start), min(end, narrower.end)
        clauses = [f"{started_at} >= %s", f"{started_at} < %s"]
        params: list[Any] = [start, end]
        for name in DIMENSIONS:
            value = getattr(self, name)
            if value is not None:
                clauses.append(f"{name} = %s")
                params.append(value)
        if self.run is not None:
            clauses.append("run_pk = %s")
            params.append(self.run)
        return " AND ".join(clauses), params

    def _days(self) -> list[Window]:
        days = [] if self.day is None else [Window(self.day, self.day)]
        if self.week is not None:
            days.append(Window(self.week, self.week + timedelta(days=6)))
        return days

    def query(self) -> str:
        """As a query string, for links."""
        return urlencode(
            {
                f.name: value.isoformat() if isinstance(value, date) else value
                for f in fields(self)
                if (value := getattr(self, f.name)) is not None
            }
        )

    def described(self) -> str:
        parts = [
            f"{f.name} {value}" if value != "" else f"no {f.name}"
            for f in fields(self)
            if (value := getattr(self, f.name)) is not None and f.name != "run"
        ]
        if self.run is not None:
            parts.append("one run")
        return ", ".join(parts) or "everything"


@dataclass
class Item:
    """A blocked item as a drill-down shows it (`status`: how a candidate changes it)."""

    kind: str
    ref_id: int
    entity: str | None
    field: str
    action: str
    reason: str
    call: str
    sources: str
    status: str = ""
    ticket_id: int | None = None

    @property
    def ticket_parts(self) -> tuple[str | None, ...]:
        """What the run's ticket for it is keyed by (review.opening.ticket_key)."""
        if self.kind == FINDING:
            return ("finding", self.reason)
        return ("conflict", self.entity, self.field)


@dataclass
class RunItems:
    pk: int
    run_id: str
    agent: str
    started_at: Any
    items: list[Item]


# The LIMIT of a slice to the end.
EVERY_RUN = 2**62


class RunsFound(Sequence[RunItems]):
    """The runs a drill-down finds, newest first, each with its matching items, read when
    asked for: count() is the number of runs (and total_items that of their items), a slice
    is those runs with their items, as Django's Paginator pages through them. Made from
    `with_items`, a WITH clause defining `items` (run_pk, started_at, ITEM_COLUMNS, and
    status when `status`), and `where`, a condition on them."""

    def __init__(
        self,
        with_items: str,
        params: Sequence[Any],
        where: str,
        where_params: Sequence[Any],
        *,
        status: bool = False,
    ) -> None:
        self._with = with_items
        self._params = [*params, *where_params]
        self._where = where
        self._columns = ", ".join((*ITEM_COLUMNS, "status") if status else ITEM_COLUMNS)
        self._totals: tuple[int, int] | None = None

    def count(self) -> int:  # type: ignore[override]  # Sequence's counts a value
        return self._counted()[0]

    def __len__(self) -> int:
        return self.count()

    def __iter__(self) -> Iterator[RunItems]:
        return iter(self[:])

    @property
    def total_items(self) -> int:
        return self._counted()[1]

    def _counted(self) -> tuple[int, int]:
        if self._totals is None:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"{self._with} SELECT count(DISTINCT run_pk), count(*) FROM items "
                    f"WHERE {self._where}",
                    self._params,
                )
                runs, items = cursor.fetchone()
            self._totals = (runs, items)
        return self._totals

    @overload
    def __getitem__(self, wanted: int) -> RunItems: ...

    @overload
    def __getitem__(self, wanted: slice) -> list[RunItems]: ...

    def __getitem__(self, wanted: int | slice) -> RunItems | list[RunItems]:
        """The runs of a slice (no step), with their items: two queries, whatever it holds."""
        if isinstance(wanted, int):
            return self[wanted : wanted + 1][0]
        offset = wanted.start or 0
        limit = EVERY_RUN if wanted.stop is None else max(0, wanted.stop - offset)
        runs = f"{Run._meta.db_table} r"
        with connection.cursor() as cursor:
            cursor.execute(
                f"{self._with} SELECT p.run_pk, r.run_id, r.agent, r.started_at FROM ("
                f"SELECT run_pk, max(started_at) AS newest FROM items WHERE {self._where} "
                "GROUP BY run_pk ORDER BY newest DESC, run_pk DESC LIMIT %s OFFSET %s"
                f") p JOIN {runs} ON r.id = p.run_pk ORDER BY p.newest DESC, p.run_pk DESC",
                [*self._params, limit, offset],
            )
            found = [
                RunItems(pk, run_id, agent, started_at, [])
                for pk, run_id, agent, started_at in cursor.fetchall()
            ]
            by_pk = {run.pk: run for run in found}
            if by_pk:
                cursor.execute(
                    f"{self._with} SELECT run_pk, {self._columns} FROM items WHERE "
                    f"{self._where} AND run_pk IN ({placeholders(len(by_pk))}) "
                    "ORDER BY run_pk, kind DESC, ref_id, call",
                    [*self._params, *by_pk],
                )
                for run_pk, *values in cursor.fetchall():
                    by_pk[run_pk].items.append(Item(*values))
        return found
