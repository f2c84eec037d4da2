"""Traces for the retention tests: an old delivery (native lines with a conflict and a
`seq` line, and an OTLP export whose converted records hold their own data) and a recent
one. Each payload carries a marker that is in no verdict, finding or ticket (tool call
arguments, an observation's warnings), so that a scan of the database can look for it."""

from __future__ import annotations

import json
from pathlib import Path

from reviewapp.ingest.pipeline import ingest_file
from reviewapp.models import IngestBatch

OTEL = Path(__file__).resolve().parent.parent / "fixtures" / "otel"
OLD_MARKER = "old-payload-7f3a"
OTLP_MARKER = "stale cache"  # a warning of the OTLP fixture's observation
NEW_MARKER = "new-payload-91c2"


def _lines(run_id: str, marker: str) -> list[dict]:
    def call(call_id: str, tool: str) -> dict:
        return {
            "runId": run_id,
            "type": "tool_call",
            "toolCallId": call_id,
            "tool": tool,
            "arguments": {"orderId": f"{run_id}-order", "memo": marker},
            "ok": True,
        }

    def observation(observation_id: str, call_id: str, source: str, status: str) -> dict:
        return {
            "runId": run_id,
            "type": "tool_observation",
            "observationId": observation_id,
            "toolCallId": call_id,
            "source": source,
            "revisionDomain": "payments",
            "sourceRevision": 42,
            "status": status,
            "errors": [],
        }

    return [
        call("c1", "get_refund"),
        call("c2", "get_ledger_entry"),
        observation("o1", "c1", "refund-service", "refunded"),
        observation("o2", "c2", "order-ledger", "chargeback"),
        {"runId": run_id, "type": "agent_action", "name": "issue_store_credit"},
    ]


def old_content() -> bytes:
    lines = _lines("old-run", OLD_MARKER)
    lines.append(
        {"runId": "old-seq", "type": "agent_action", "name": "note", "seq": 0, "memo": OLD_MARKER}
    )
    otlp = json.dumps(json.loads((OTEL / "otlp-js-sdk.json").read_text()), separators=(",", ":"))
    return ("\n".join(json.dumps(line) for line in lines) + "\n" + otlp + "\n").encode()


def new_content() -> bytes:
    return ("\n".join(json.dumps(line) for line in _lines("new-run", NEW_MARKER)) + "\n").encode()


def deliver(tmp_path: Path, name: str, content: bytes):
    path = tmp_path / name
    path.write_bytes(content)
    return ingest_file(path, channel=IngestBatch.Channel.CLI)
