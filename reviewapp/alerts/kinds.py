"""The kinds of alert, by name, with what each means (the alerts page lists them)."""

from __future__ import annotations

SPIKE = "spike"
NEW_FAMILY = "new_family"
GATE_BLOCKS = "gate_blocks"
BATCH_FAILED = "batch_failed"
SUGGESTION_READY = "suggestion_ready"

KINDS: dict[str, str] = {
    SPIKE: "Unexplained discrepancies spiked (the tallies' spike rule)",
    NEW_FAMILY: "A new family of tickets, with open tickets",
    GATE_BLOCKS: "The gate, enforcing, blocks more checks than the set rate",
    BATCH_FAILED: "An ingest batch failed for good",
    SUGGESTION_READY: "A suggestion is ready to review",
}
