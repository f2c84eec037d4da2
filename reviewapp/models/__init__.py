"""Crosscheck's stored facts, one module per part of the product. Every package of the app
reads and writes them; they import nothing of the app but each other (by name).

Lines, records, judgements, verdicts and findings are written once and never changed: a
run judged again gets a new judgement beside the old one. Tickets are the work items that
move; every move of a ticket is an AuditEvent."""

from reviewapp.models.alerts import Alert, AlertDelivery, AlertDestination
from reviewapp.models.ingest import (
    ApiToken,
    IngestBatch,
    IngestPart,
    Run,
    ServicePulse,
    TraceLine,
    TraceRecord,
    stored_documents,
)
from reviewapp.models.judging import Finding, Judgement, Verdict
from reviewapp.models.policy import (
    PolicyCandidate,
    PolicyVersion,
    ProspectiveSettlement,
    RuleProposal,
    SettlementLabelling,
    draft_name,
    policy_name,
    proposal_name,
)
from reviewapp.models.privacy import ErasureRequest, ProtectedValue, RedactionRuleSet
from reviewapp.models.replay import (
    FixtureRun,
    FixtureSet,
    FixtureSuiteMark,
    ReplayItem,
    ReplayJob,
    ReplayResult,
)
from reviewapp.models.reports import (
    FrozenDiscrepancy,
    MonthClosing,
    TallyEntry,
    TallyRun,
    TallyState,
)
from reviewapp.models.review import (
    AuditChain,
    AuditEvent,
    Ticket,
    TicketCombinationDelta,
    TicketComment,
    TicketFacetDelta,
)
from reviewapp.models.shadow import (
    GateAnswer,
    GateMode,
    ShadowBackfill,
    ShadowBatch,
    ShadowDesignation,
)
from reviewapp.models.suggestions import RuleSuggestion, SuggestionDismissal, TicketMark

__all__ = [
    "Alert",
    "AlertDelivery",
    "AlertDestination",
    "draft_name",
    "policy_name",
    "proposal_name",
    "ApiToken",
    "AuditChain",
    "AuditEvent",
    "ErasureRequest",
    "Finding",
    "GateAnswer",
    "GateMode",
    "FixtureRun",
    "FixtureSet",
    "FixtureSuiteMark",
    "IngestBatch",
    "IngestPart",
    "Judgement",
    "FrozenDiscrepancy",
    "MonthClosing",
    "PolicyCandidate",
    "PolicyVersion",
    "ProspectiveSettlement",
    "ProtectedValue",
    "RedactionRuleSet",
    "ReplayItem",
    "ReplayJob",
    "ReplayResult",
    "RuleProposal",
    "RuleSuggestion",
    "SuggestionDismissal",
    "SettlementLabelling",
    "Run",
    "ServicePulse",
    "ShadowBackfill",
    "ShadowBatch",
    "ShadowDesignation",
    "TallyEntry",
    "TallyRun",
    "TallyState",
    "Ticket",
    "TicketCombinationDelta",
    "TicketComment",
    "TicketFacetDelta",
    "TicketMark",
    "TraceLine",
    "TraceRecord",
    "stored_documents",
    "Verdict",
]
