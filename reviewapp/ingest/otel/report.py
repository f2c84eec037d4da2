"""What reading a document's spans came to: how many spans it held, how many were tool
calls read, and every other span dropped, grouped by why, each reason with its count and
its first example. Summed over a batch's lines, it is what every ingest summary says, so
that a file is never "accepted" with its tool calls gone in silence (issue 27)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

NOT_A_TOOL_CALL = "not a tool call"
UNREADABLE = "could not be read: "
# A document with thousands of malformed spans names this many reasons, the rest as one.
MAX_REASONS = 20
OTHER_REASONS = "other reasons"
MAX_EXAMPLE = 200
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"' + r"|'(?:[^'\\]|\\.)*'")


def _short(text: str) -> str:
    return text if len(text) <= MAX_EXAMPLE else text[: MAX_EXAMPLE - 3] + "..."


def unreadable_reason(message: str, where: str) -> str:
    """The reason a span did not read, without where it was or the value it held (so that
    alike spans share it): 'spans[3] ("x"): traceId "zz" is not ...' → 'traceId … is not ...'."""
    if message.startswith(where):
        _, colon, rest = message.partition(": ")
        message = rest if colon else message[len(where) :].strip()
    return UNREADABLE + _QUOTED.sub("…", message)


@dataclass
class SpanReport:
    spans: int = 0  # every span the document held, read or not
    tool_calls: int = 0  # tool calls read into records
    # reason → [how many spans, the first one's example]
    dropped: dict[str, list[Any]] = field(default_factory=dict)

    @classmethod
    def of(
        cls, spans: Sequence[Any], unread: Sequence[tuple[str, str]], called: Sequence[Any]
    ) -> SpanReport:
        """A document's report: its spans read (each a _Span: `where`), the (where, why) of
        those that did not read, and the spans read as tool calls."""
        report = cls(spans=len(spans) + len(unread), tool_calls=len(called))
        calls = {id(span) for span in called}
        for span in spans:
            if id(span) not in calls:
                report.drop(NOT_A_TOOL_CALL, span.where)
        for where, message in unread:
            report.drop(unreadable_reason(message, where), message)
        return report

    def drop(self, reason: str, example: str, count: int = 1) -> None:
        if reason not in self.dropped and len(self.dropped) >= MAX_REASONS:
            reason = OTHER_REASONS
        found = self.dropped.setdefault(reason, [0, _short(example)])
        found[0] += count

    @property
    def dropped_count(self) -> int:
        return sum(count for count, _ in self.dropped.values())

    @property
    def unread(self) -> int:
        """Spans dropped for any reason but that they are no tool call."""
        return self.dropped_count - self.dropped.get(NOT_A_TOOL_CALL, [0])[0]

    @property
    def is_warning(self) -> bool:
        """Worth a warning: spans and not one tool call, or spans that did not read."""
        return bool(self.spans and (not self.tool_calls or self.unread))

    def add(self, other: SpanReport) -> None:
        self.spans += other.spans
        self.tool_calls += other.tool_calls
        for reason, (count, example) in other.dropped.items():
            self.drop(reason, example, count)

    def as_json(self) -> dict[str, Any]:
        return {
            "spans": self.spans,
            "toolCalls": self.tool_calls,
            "dropped": self.dropped_count,
            "reasons": [
                {"reason": reason, "count": count, "firstExample": example}
                for reason, (count, example) in self.dropped.items()
            ],
        }

    def summary_json(self) -> dict[str, Any]:
        """What every answer says of it: the counts, the reasons, in words, and whether it
        is a warning."""
        return {**self.as_json(), "message": self.message(), "warning": self.is_warning}

    @classmethod
    def of_json(cls, data: Any) -> SpanReport:
        report = cls()
        if isinstance(data, dict):
            report.spans = int(data.get("spans") or 0)
            report.tool_calls = int(data.get("toolCalls") or 0)
            for one in data.get("reasons") or []:
                report.drop(one["reason"], one["firstExample"], one["count"])
        return report

    def message(self) -> str:
        """The report in words: '12 spans read, 0 tool calls: not one of them is a tool call;
        12 dropped: 10 not a tool call (first: ...), 2 could not be read: ... (first: ...)'."""
        if not self.spans:
            return ""
        said = f"{self.spans:,} span{'' if self.spans == 1 else 's'} read, "
        said += f"{self.tool_calls:,} tool call{'' if self.tool_calls == 1 else 's'}"
        if not self.tool_calls:
            said += ": not one of them is a tool call"
        if self.dropped:
            reasons = ", ".join(
                f"{count:,} {reason} (first: {example})"
                for reason, (count, example) in self.dropped.items()
            )
            said += f"; {self.dropped_count:,} dropped: {reasons}"
        return said
