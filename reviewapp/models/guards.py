"""What the database itself refuses, declared once, with the models that use it:

- append_only(): what was recorded (lines, records, judgements, verdicts, findings, policy
  versions, comments, the audit trail, settlement labels) is never updated, deleted or
  truncated; a line's raw bytes alone may become a tombstone once (TRACE_LINE_TOMBSTONE,
  retention), and its converted records' data NULL (TRACE_RECORD_TOMBSTONE);
- proposal_guard(): a decided proposal keeps its decision, and is published once; nothing
  is deleted;
- published_with_approval(): four eyes on every policy version: it publishes at least one
  proposal approved by someone other than its proposer, and names its publisher;
- audit_chain(): each audit event is chained after the head's, and only this trigger moves
  the head: it runs as the owner of the tables (AsOwnerTrigger), the app's role may only
  read the head;
- only_active_current() / only_active_tickets(): only an ACTIVE judgement (not a shadow or
  replay one) can be a run's current judgement or open a ticket;
- references() / referenced(): the one place a foreign key is still hand-made: a line's
  batch and a record's run and line, checked once per statement over its new rows instead
  of row by row at commit as a deferred foreign key is (real foreign keys there cost the
  ingest more than 15%: the figure is at TraceLine.batch). A row pointing at no row is
  refused, and so is deleting a row still pointed at. Every other reference is a real
  foreign key (deferrable: checked when the transaction commits).

These are django-pgtrigger triggers, installed by migrations.

(Deliberate maintenance, like emptying the test database between tests, goes through
pgtrigger.ignore; the app never does.)

Who has which role is not a trigger: the app's role may not write memberships, permissions
or Django's superuser flag at all, and gives a role only through reviewapp_account_set
(migration 0033, reviewapp/accounts/roles.py), which records its audit event."""

from __future__ import annotations

import pgtrigger
from django.db import models
from pgtrigger import compiler

REFUSED = "USING ERRCODE = 'insufficient_privilege'"


def append_only(*, erasable: bool = True, allowed_update: str = "") -> list[pgtrigger.Trigger]:
    """UPDATE, DELETE and TRUNCATE refused, but for two audited exceptions: `erasable`, an
    approved erasure may replace a value in its rows by its token (erasure_door; the audit
    trail is not erasable: its events never hold a trace's values); `allowed_update`, SQL
    over OLD and NEW, the one UPDATE of a row let through (a line's tombstone,
    TRACE_LINE_TOMBSTONE)."""
    refusal = f"RAISE EXCEPTION 'append-only: % on % is refused', TG_OP, TG_TABLE_NAME {REFUSED};"
    if allowed_update:
        refusal = f"IF TG_OP = 'UPDATE' AND ({allowed_update}) THEN RETURN NEW; END IF; {refusal}"
    return [
        pgtrigger.Trigger(
            name="append_only",
            when=pgtrigger.Before,
            operation=pgtrigger.Update | pgtrigger.Delete,
            func=erasure_door(refusal) if erasable else refusal,
        ),
        pgtrigger.Trigger(
            name="append_only_truncate",
            level=pgtrigger.Statement,
            when=pgtrigger.Before,
            operation=pgtrigger.Truncate,
            func=f"RAISE EXCEPTION 'append-only: TRUNCATE on % is refused', TG_TABLE_NAME {REFUSED};",
        ),
    ]


# The one exception to append-only: while an approved ErasureRequest runs, its transaction
# names it (SET LOCAL crosscheck.erasure = its id, privacy/erasure.py), and each row it
# changes then holds the request's token (as text, or as hex in a bytea's text form): an
# erasure writes the token where the value was, and nothing else gets through. The app's
# role may set the setting, but cannot make a request approved without naming a second
# person (erasure_guard), and a done request no longer opens the door. What the app's role
# may change is bounded by its privileges too: UPDATE of the columns that can hold a value
# (infra/roles.py), no DELETE (the door lets one through for a table that grants it: the
# protected copies of the value).
ERASURE_SETTING = "crosscheck.erasure"
ERASING = (
    "EXISTS (SELECT 1 FROM reviewapp_erasurerequest e WHERE e.state = 'approved' "
    f"AND e.id::text = current_setting('{ERASURE_SETTING}', true) AND (TG_OP = 'DELETE' "
    "OR position(e.token in NEW::text) > 0 "
    "OR position(encode(convert_to(e.token, 'UTF8'), 'hex') in NEW::text) > 0))"
)


def erasure_door(refusal: str) -> str:
    """A row trigger's body: the row goes through when an approved erasure is running and
    writes its token, else `refusal`."""
    return (
        f"IF {ERASING} THEN IF TG_OP = 'DELETE' THEN RETURN OLD; END IF; RETURN NEW; END IF; "
        f"{refusal}"
    )


def erasure_guard() -> list[pgtrigger.Trigger]:
    """Four eyes on an erasure: a request is made pending, approved or refused by someone
    other than its requester (its CHECKs), and done once; who asked, why and for which
    value never change, nor does a decision; nothing is deleted. Only the end of the run
    may empty the encrypted value (and a done request must have: its CHECK)."""
    return [
        pgtrigger.Trigger(
            name="erasure_requested",
            when=pgtrigger.Before,
            operation=pgtrigger.Insert,
            condition=pgtrigger.Condition(
                "NEW.state <> 'requested' OR NEW.decided_by_id IS NOT NULL"
            ),
            func=f"RAISE EXCEPTION 'an erasure request starts as requested, approved by no one' {REFUSED};",
        ),
        pgtrigger.Trigger(
            name="erasure_decided",
            when=pgtrigger.Before,
            operation=pgtrigger.Update,
            condition=pgtrigger.Condition(_ERASURE_CHANGED),
            func=f"RAISE EXCEPTION 'erasure request %: this change is refused', OLD.id {REFUSED};",
        ),
        pgtrigger.Trigger(
            name="erasure_kept",
            when=pgtrigger.Before,
            operation=pgtrigger.Delete,
            func=f"RAISE EXCEPTION 'append-only: DELETE on % is refused', TG_TABLE_NAME {REFUSED};",
        ),
        append_only()[1],
    ]


_ERASURE_CHANGED = """
NEW.requested_by_id IS DISTINCT FROM OLD.requested_by_id OR NEW.requested_at IS DISTINCT FROM OLD.requested_at
OR NEW.reason IS DISTINCT FROM OLD.reason OR NEW.token IS DISTINCT FROM OLD.token
OR NOT (
    (OLD.state = 'requested' AND NEW.state IN ('approved', 'refused') AND NEW.finished_at IS NULL
        AND NEW.value_encrypted = OLD.value_encrypted AND NEW.report = OLD.report)
    OR (OLD.state = 'approved' AND NEW.state = 'done'
        AND NEW.decided_by_id = OLD.decided_by_id AND NEW.decided_at = OLD.decided_at)
)
"""


# Retention (privacy/retention.py): a line's raw bytes replaced by a tombstone that keeps
# their hash and size, the one change of a line the database lets through: raw becomes
# empty, expired_at, raw_sha256 and raw_size go from NULL to set, the hash and size are the
# SHA-256 and length of the bytes it replaces (checked here, not trusted), and every other
# column (whatever columns are added later) is as it was. Once, and never back.
TOMBSTONE_COLUMNS = ("raw", "expired_at", "raw_sha256", "raw_size")
_OTHER_COLUMNS = "(to_jsonb({row}) - " + " - ".join(f"'{c}'" for c in TOMBSTONE_COLUMNS) + ")"
TRACE_LINE_TOMBSTONE = (
    "OLD.expired_at IS NULL AND NEW.expired_at IS NOT NULL AND NEW.raw = ''::bytea "
    "AND NEW.raw_sha256 IS NOT DISTINCT FROM encode(sha256(OLD.raw), 'hex') "
    "AND NEW.raw_size IS NOT DISTINCT FROM octet_length(OLD.raw) "
    f"AND {_OTHER_COLUMNS.format(row='NEW')} = {_OTHER_COLUMNS.format(row='OLD')}"
)
# A record converted from an external span holds its payload in `data`: it goes to NULL
# once its line is a tombstone, and nothing else of the record changes.
TRACE_RECORD_TOMBSTONE = (
    "OLD.data IS NOT NULL AND NEW.data IS NULL "
    "AND (to_jsonb(NEW) - 'data') = (to_jsonb(OLD) - 'data') "
    "AND EXISTS (SELECT 1 FROM reviewapp_traceline l "
    "WHERE l.id = OLD.line_id AND l.expired_at IS NOT NULL)"
)


# What an audit event's hash covers, each field as "<length>:<text>" (no separator can be
# forged), then the previous event's hash. reviewapp/accounts/audit.py computes the same
# in Python to verify the chain.
AUDIT_HASHED = (
    "{row}.position::text",
    """to_char({row}.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')""",
    "coalesce({row}.actor_id::text, '')",
    "{row}.verb",
    "coalesce({row}.ticket_id::text, '')",
    "{row}.target",
    "{row}.channel",
    "{row}.data::text",
    "{row}.prev_hash",
)


def audit_content_sql(row: str) -> str:
    """The SQL text an audit event's hash is the SHA-256 of (see AUDIT_HASHED)."""
    return " || ".join(
        f"length({expr})::text || ':' || {expr}"
        for expr in (field.format(row=row) for field in AUDIT_HASHED)
    )


class AsOwnerTriggerSql(compiler.UpsertTriggerSql):
    """pgtrigger's installation SQL, its trigger function SECURITY DEFINER: it runs as the
    role that made it (the owner of the tables, whom migrations run as) whoever fires it,
    with a search_path of its own, as a definer's function must have. Migrations name this
    class, as they name pgtrigger's: a different template needs a class of its own."""

    def get_template(self) -> str:
        template = super().get_template()
        # The last function of the template is the trigger's (the first, the escape hatch's).
        head, language, tail = template.rpartition("$$ LANGUAGE plpgsql;")
        if not language:
            raise RuntimeError("pgtrigger's installation template has changed")
        return (
            f"{head}$$ LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp;{tail}"
        )


class AsOwnerTrigger(pgtrigger.Trigger):
    """A trigger whose function runs as the owner of the tables: it may write what the role
    whose statement fires it may not."""

    def compile(self, model: models.Model) -> compiler.Trigger:
        compiled = super().compile(model)
        return compiler.Trigger(name=compiled.name, sql=AsOwnerTriggerSql(**compiled.sql.kwargs))


def audit_chain() -> pgtrigger.Trigger:
    """Each new audit event takes the next place in the chain, after the head's: the head
    row is locked until the inserting transaction ends, so concurrent events line up. It
    runs as the owner of the tables: the app's role may read the head, never move it."""
    content = audit_content_sql("NEW")
    return AsOwnerTrigger(
        name="audit_chain",
        when=pgtrigger.Before,
        operation=pgtrigger.Insert,
        declare=[("head", "RECORD")],
        func=(
            "INSERT INTO reviewapp_auditchain (id, position, last_hash) VALUES (1, 0, '') "
            "ON CONFLICT (id) DO NOTHING; "
            "SELECT position, last_hash INTO head FROM reviewapp_auditchain WHERE id = 1 "
            "FOR UPDATE; "
            "NEW.position := head.position + 1; "
            "NEW.prev_hash := head.last_hash; "
            f"NEW.hash := encode(sha256(convert_to({content}, 'UTF8')), 'hex'); "
            "UPDATE reviewapp_auditchain SET position = NEW.position, last_hash = NEW.hash "
            "WHERE id = 1; "
            "RETURN NEW;"
        ),
    )


# What a decided proposal may not change (its text is migration 0015's: kept as it is, or
# the trigger would be made again).
_PROPOSAL_CHANGED = """
NEW.kind IS DISTINCT FROM OLD.kind OR NEW.change IS DISTINCT FROM OLD.change OR NEW.rationale IS DISTINCT FROM OLD.rationale
OR NEW.proposed_by_id IS DISTINCT FROM OLD.proposed_by_id OR NEW.created_at IS DISTINCT FROM OLD.created_at
OR NEW.base_number IS DISTINCT FROM OLD.base_number
OR (OLD.state <> 'pending' AND (
    NEW.state IS DISTINCT FROM OLD.state OR NEW.decided_by_id IS DISTINCT FROM OLD.decided_by_id
    OR NEW.decided_at IS DISTINCT FROM OLD.decided_at OR NEW.decision_reason IS DISTINCT FROM OLD.decision_reason))
OR (OLD.published_in_id IS DISTINCT FROM NULL AND NEW.published_in_id IS DISTINCT FROM OLD.published_in_id)
"""


def proposal_guard() -> list[pgtrigger.Trigger]:
    """Once decided, a proposal's decision never changes; the only later change allowed is
    recording the version that published it. Nothing is ever deleted."""
    return [
        pgtrigger.Trigger(
            name="decided_proposal",
            when=pgtrigger.Before,
            operation=pgtrigger.Update,
            condition=pgtrigger.Condition(_PROPOSAL_CHANGED),
            func=erasure_door(
                f"RAISE EXCEPTION 'a decided proposal cannot be changed (proposal %)', OLD.id {REFUSED};"
            ),
        ),
        pgtrigger.Trigger(
            name="proposal_kept",
            when=pgtrigger.Before,
            operation=pgtrigger.Delete,
            func=f"RAISE EXCEPTION 'append-only: DELETE on % is refused', TG_TABLE_NAME {REFUSED};",
        ),
        append_only()[1],
    ]


# A proposal that someone other than its proposer approved (the CHECKs of RuleProposal
# also hold each row to it), among those `{published}` selects.
_APPROVED_BY_ANOTHER = (
    "SELECT 1 FROM reviewapp_ruleproposal p WHERE {published} AND p.state = 'approved' "
    "AND p.decided_by_id IS NOT NULL AND p.decided_by_id <> p.proposed_by_id"
)
_UNAPPROVED = "publishes no proposal approved by someone other than its proposer"


def published_with_approval() -> list[pgtrigger.Trigger]:
    """Four eyes on every policy version: it names who published it, and publishes at
    least one proposal approved by someone other than its proposer. The publisher may be
    that approver or that proposer: two people have decided each change either way. The
    first version is no exception (before it the built-in default judges, and is no row).
    Checked when the inserting transaction commits, since a publish marks its proposals
    published in the version after inserting it; proposal_guard() keeps a proposal from
    being published in a second one."""
    linked = _APPROVED_BY_ANOTHER.format(published="p.published_in_id = NEW.id")
    return [
        pgtrigger.Trigger(
            name="published_with_approval",
            when=pgtrigger.After,
            operation=pgtrigger.Insert,
            timing=pgtrigger.Deferred,
            func=(
                f"IF NEW.published_by_id IS NULL OR NOT EXISTS ({linked}) THEN "
                f"RAISE EXCEPTION 'policy v% {_UNAPPROVED}', NEW.number {REFUSED}; "
                "END IF; RETURN NULL;"
            ),
        )
    ]


def only_active_current() -> list[pgtrigger.Trigger]:
    """A run's current judgement is one of its own ACTIVE judgements."""
    return [
        _statement_check(
            name=f"only_active_current_{event}",
            operation=operation,
            bad=(
                "SELECT 1 FROM new_values n JOIN reviewapp_judgement j "
                "ON j.id = n.current_judgement_id WHERE j.purpose <> 'active' OR j.run_id <> n.id"
            ),
            message="only an active judgement of the run itself can be its current one",
        )
        for event, operation in (("insert", pgtrigger.Insert), ("update", pgtrigger.Update))
    ]


def only_active_tickets() -> list[pgtrigger.Trigger]:
    """A ticket is opened by an ACTIVE judgement, and its verdict or finding is one."""
    # Scalar subqueries, each an index probe for the row: a join would be planned as a
    # hash of whole tables that grow with every ingest.
    purpose = "(SELECT j.purpose FROM reviewapp_judgement j WHERE j.id = {})"
    bad = (
        "SELECT 1 FROM new_values n WHERE "
        f"{purpose.format('n.judgement_id')} <> 'active' OR "
        + purpose.format(
            "(SELECT v.judgement_id FROM reviewapp_verdict v WHERE v.id = n.verdict_id)"
        )
        + " <> 'active' OR "
        + purpose.format(
            "(SELECT f.judgement_id FROM reviewapp_finding f WHERE f.id = n.finding_id)"
        )
        + " <> 'active'"
    )
    return [
        _statement_check(
            name=f"only_active_tickets_{event}",
            operation=operation,
            bad=bad,
            message="only an active judgement opens tickets",
        )
        for event, operation in (("insert", pgtrigger.Insert), ("update", pgtrigger.Update))
    ]


def _statement_check(*, name: str, operation, bad: str, message: str) -> pgtrigger.Trigger:
    # Once per statement over its new rows (an ingest inserts thousands in one COPY).
    return pgtrigger.Trigger(
        name=name,
        level=pgtrigger.Statement,
        when=pgtrigger.After,
        operation=operation,
        referencing=pgtrigger.Referencing(new="new_values"),
        declare=[("refused", "boolean")],
        func=_refuse_if(bad, f"RAISE EXCEPTION '{message}' {REFUSED}") + " RETURN NULL;",
    )


def _refuse_if(bad: str, refusal: str) -> str:
    """PL/pgSQL running `refusal` when the query `bad` finds a row. The query goes through
    EXECUTE, so it is planned for this statement's rows and the tables as they are now:
    PL/pgSQL would keep the plan it made for its first statements, when an ingest's tables
    were nearly empty, and go on scanning them whole once they have grown."""
    return f"EXECUTE $check$SELECT EXISTS ({bad})$check$ INTO refused; IF refused THEN {refusal}; END IF;"


FOREIGN_KEY = "USING ERRCODE = 'foreign_key_violation'"
# Parents named by references() whose rows are never deleted (their own append_only()).
APPEND_ONLY_TABLES = {"reviewapp_traceline"}


def unchecked_reference(model: str) -> models.ForeignKey:
    """An optional reference without a foreign key constraint, followed from its row and
    never looked up by (no index): not checked, as what it names is never deleted (replay's
    fixture runs and results: ReplayResult says why)."""
    return models.ForeignKey(
        model,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )


def references(*links: tuple[str, str]) -> list[pgtrigger.Trigger]:
    """Each (column, parent table): every new row's column names a row of the parent table
    (or is NULL). Only where a real foreign key costs ingest too much (TraceLine.batch says
    how much); the parent declares referenced() for the same link. Parents that can be
    deleted are locked FOR KEY SHARE, as a foreign key's check locks them, so that none
    goes before this transaction ends; an append-only parent cannot go (and its rows
    cannot be locked by a role that may not update them).
    Parents are found by their primary key, once per value the new rows name (a COPY of
    5,000 lines names one batch, not 5,000): a join would be planned as a hash of the
    whole parent table, which grows with every ingest."""
    locks = "".join(
        f"EXECUTE $lock$SELECT 1 FROM {parent} p WHERE p.id = ANY(ARRAY("
        f"SELECT DISTINCT n.{column} FROM new_values n)) FOR KEY SHARE OF p$lock$; "
        for column, parent in links
        if parent not in APPEND_ONLY_TABLES
    )
    missing = " OR ".join(
        f"EXISTS (SELECT 1 FROM (SELECT DISTINCT n.{column} AS named FROM new_values n "
        f"WHERE n.{column} IS NOT NULL) d WHERE (SELECT p.id FROM {parent} p "
        "WHERE p.id = d.named) IS NULL)"
        for column, parent in links
    )
    refusal = f"RAISE EXCEPTION 'a row of % points at no row', TG_TABLE_NAME {FOREIGN_KEY}"
    trigger = pgtrigger.Trigger(
        name="references_insert",
        level=pgtrigger.Statement,
        when=pgtrigger.After,
        operation=pgtrigger.Insert,
        referencing=pgtrigger.Referencing(new="new_values"),
        declare=[("refused", "boolean")],
        func=f"{locks}{_refuse_if(f'SELECT 1 WHERE {missing}', refusal)} RETURN NULL;",
    )
    return [trigger]


def referenced(*links: tuple[str, str]) -> list[pgtrigger.Trigger]:
    """Each (child table, column): no row is deleted while a child row points at it."""
    pointed = " OR ".join(
        f"EXISTS (SELECT 1 FROM old_values o JOIN {child} c ON c.{column} = o.id)"
        for child, column in links
    )
    refusal = f"RAISE EXCEPTION 'a row of % is still pointed at', TG_TABLE_NAME {FOREIGN_KEY}"
    trigger = pgtrigger.Trigger(
        name="referenced_delete",
        level=pgtrigger.Statement,
        when=pgtrigger.After,
        operation=pgtrigger.Delete,
        referencing=pgtrigger.Referencing(old="old_values"),
        declare=[("refused", "boolean")],
        func=f"{_refuse_if(f'SELECT 1 WHERE {pointed}', refusal)} RETURN NULL;",
    )
    return [trigger]
