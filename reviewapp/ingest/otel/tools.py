"""Which spans are tool calls, the way each framework writes them, and what the spans around
them say of the run: its agent and its conversation.

Tool spans: GenAI `execute_tool` (operation or span name), OpenInference TOOL, a Langfuse
TOOL observation, pydantic-ai / Logfire (`running tool`, `tool_arguments` /
`tool_response`), Vercel AI SDK `ai.toolCall`, a span with `gen_ai.tool.name` and a call id
or arguments (Koog, any-agent), MCP `tools/call`, LangSmith `tool`, a span whose output is
a LangChain ToolMessage, and BeeAI's ReAct events (below)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reviewapp.ingest.otel.payloads import decode_text, is_tool_message
from reviewapp.ingest.otel.spans import _Raw, _Span
from reviewapp.ingest.otel.values import ExternalFormatError

TOOL_NAME_PREFIXES = ("execute_tool ", "running tool: ", "tools/call ")
ARGUMENT_KEYS = (
    "gen_ai.tool.call.arguments",
    "input.value",
    "tool_arguments",
    "gcp.vertex.agent.tool_call_args",
    "ai.toolCall.args",
    "gen_ai.tool.args",
    "traceloop.entity.input",
)
RESULT_KEYS = (
    "gen_ai.tool.call.result",
    "output.value",
    "tool_response",
    "gcp.vertex.agent.tool_response",
    "ai.toolCall.result",
    "gen_ai.output",
    "traceloop.entity.output",
)
# The keys that name an agent, best first: CrewAI writes its agent's md5 key as
# gen_ai.agent.name and the role people gave it as crewai.agent.role.
AGENT_NAME_KEYS = ("crewai.agent.role", "gen_ai.agent.name")
# LangSmith's OpenTelemetry mode writes a run's metadata as langsmith.metadata.*, where a
# thread is named by any of the three keys LangSmith groups threads by.
CONVERSATION_KEYS = (
    "gen_ai.conversation.id",
    "session.id",
    "langsmith.metadata.thread_id",
    "langsmith.metadata.session_id",
    "langsmith.metadata.conversation_id",
)
# BeeAI writes a tool's life as events; success and error carry what it returned.
_BEEAI_RESULT_EVENTS = ("success", "error")
_BRACKETED = re.compile(r".*\[([^\[\]]+)\]\s*")
# A name that ends in a UUID names one run, not an agent (Koog's "run.6f8d2449-...").
_ENDS_IN_UUID = re.compile(r".*[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


def _upper(value: Any) -> str:
    return value.strip().upper() if isinstance(value, str) else ""


def _beeai_event(peek: Mapping[str, Any]) -> tuple[str, str] | None:
    """(what, event) of a BeeAI span from its `target` ("tool.search.wikipedia.success")."""
    target = peek.get("target")
    if isinstance(target, str) and "." in target and target.startswith(("tool.", "agent.")):
        what, _, event = target.rpartition(".")
        return what, event
    return None


def looks_like_tool(name: Any, peek: Mapping[str, Any], kind: str | None, output: Any = None):
    """Whether a span, read or not, is a tool call (its attributes as far as they read)."""
    operation = peek.get("gen_ai.operation.name")
    if operation not in (None, True, "execute_tool"):
        return False  # chat, invoke_agent, ...: a span that says what else it is
    beeai = _beeai_event(peek)
    if beeai is not None and beeai[0].startswith("tool."):
        return beeai[1] in _BEEAI_RESULT_EVENTS
    text = name if isinstance(name, str) else ""
    return bool(
        operation == "execute_tool"
        or text.startswith(TOOL_NAME_PREFIXES)
        or text in ("running tool", "ai.toolCall")
        or _upper(peek.get("openinference.span.kind")) == "TOOL"
        or kind == "TOOL"
        or "ai.toolCall.name" in peek
        or str(peek.get("logfire.msg", "")).startswith("running tool")
        or peek.get("mcp.method.name") == "tools/call"
        or _upper(peek.get("langsmith.span.kind")) == "TOOL"
        or (
            "gen_ai.tool.name" in peek
            and any(key in peek for key in ("gen_ai.tool.call.id", *ARGUMENT_KEYS, *RESULT_KEYS))
        )
        or is_tool_message(output)
    )


def raw_is_tool(raw: _Raw) -> bool:
    output = raw.raw.get("output") if raw.kind is not None else None
    if isinstance(output, str) and output.lstrip().startswith("{"):
        output = decode_text(output)[1]
    return looks_like_tool(raw.name, raw.peek, raw.kind, output)


def span_is_tool(span: _Span) -> bool:
    return looks_like_tool(span.name, span.attributes, span.kind, span.output)


@dataclass(frozen=True)
class ToolSpan:
    span: _Span
    tool: str


class Document:
    """The spans of one document by trace and id, to walk from a span to its ancestors."""

    def __init__(self, spans: list[_Span]):
        self.spans = spans
        self.by_id = {(span.trace_id, span.span_id): span for span in spans}

    def ancestors(self, span: _Span) -> Iterable[_Span]:
        seen = {span.span_id}
        parent = span.parent_id
        while parent is not None and parent not in seen:
            seen.add(parent)
            found = self.by_id.get((span.trace_id, parent))
            if found is None:
                return
            yield found
            parent = found.parent_id

    def tool_name(self, span: _Span) -> str:
        for key in ("gen_ai.tool.name", "tool.name", "ai.toolCall.name"):
            value = span.attributes.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
        name = (span.name or "").strip()
        for prefix in TOOL_NAME_PREFIXES:
            if name.startswith(prefix) and name[len(prefix) :].strip():
                return name[len(prefix) :].strip()
        if _beeai_event(span.attributes) is not None:
            # BeeAI's tool events name their tool on the ReAct step that called it.
            for ancestor in self.ancestors(span):
                value = ancestor.attributes.get("tool.name")
                if isinstance(value, str) and value.strip():
                    return value.strip()
        if name and name not in (p.strip() for p in TOOL_NAME_PREFIXES) and name != "ai.toolCall":
            return name
        raise ExternalFormatError(f"{span.where}: tool span has no tool name")

    def tool_spans(self) -> list[ToolSpan]:
        tools = [ToolSpan(span, self.tool_name(span)) for span in self.spans if span_is_tool(span)]
        return tools + self._beeai_steps(tools)

    def _beeai_steps(self, tools: list[ToolSpan]) -> list[ToolSpan]:
        """BeeAI ReAct steps (`agent.react.update`) that name a tool, its parameters and its
        output, where no tool span of the same iteration ran it (OpenMeteoTool, say): the
        step's last update is the call."""
        candidates = []
        for span in self.spans:
            event = _beeai_event(span.attributes)
            tool = span.attributes.get("tool.name")
            if (
                event is not None
                and event[0].startswith("agent.")
                and isinstance(tool, str)
                and span.attributes.get("output.value") is not None
            ):
                candidates.append((span, tool))
        if not candidates:  # nearly every document: no walk up from each tool span
            return []
        covered = {
            (tool.span.trace_id, ancestor.span_id)
            for tool in tools
            for ancestor in self.ancestors(tool.span)
        }
        steps: dict[tuple[str, str | None, str], _Span] = {}
        for span, tool in candidates:
            if (span.trace_id, span.parent_id) in covered:
                continue
            key = (span.trace_id, span.parent_id, tool)
            if key not in steps or (span.start_nanos or 0) >= (steps[key].start_nanos or 0):
                steps[key] = span
        return [ToolSpan(span, key[2]) for key, span in steps.items()]

    # --- what the spans say of the run --------------------------------------------------

    def _around(self, span: _Span) -> Iterable[_Span]:
        yield span
        yield from self.ancestors(span)

    def agent(self, span: _Span) -> str | None:
        """The agent that ran a tool: its name on the span or an ancestor (CrewAI's role
        before `gen_ai.agent.name`, which CrewAI fills with an md5 key), else the nearest
        agent span (invoke_agent, OpenInference or Langfuse AGENT) by name, else any span of
        its trace naming an agent, else the export's trace name, else the root chain span's
        name (LangSmith's `chain`, OpenInference's CHAIN: a LangChain runnable has no agent
        span), else the resource's service.name (unless an SDK's "unknown_service")."""
        for key in AGENT_NAME_KEYS:
            for one in self._around(span):
                name = one.attributes.get(key)
                if isinstance(name, str) and name.strip():
                    return name.strip()
        for one in self.ancestors(span):
            if (
                (
                    one.attributes.get("gen_ai.operation.name") == "invoke_agent"
                    or _upper(one.attributes.get("openinference.span.kind")) == "AGENT"
                    or one.kind == "AGENT"
                )
                and _beeai_event(one.attributes) is None  # BeeAI's steps are AGENT spans too
                and _is_name(one.name)
            ):
                return _agent_from_span_name(one.name or "")
        for key in AGENT_NAME_KEYS:
            for one in self.spans:
                name = one.attributes.get(key)
                if one.trace_id == span.trace_id and isinstance(name, str) and name.strip():
                    return name.strip()
        if _is_name(span.trace_name):
            return span.trace_name
        root = self._root_chain(span)
        if root is not None:
            return root
        service = span.resource.get("service.name")
        if (
            isinstance(service, str)
            and service
            and not service.startswith("unknown_service")
            and self._whole_lineage(span)
        ):
            return service
        return None

    def _root_chain(self, span: _Span) -> str | None:
        """The name of the trace's root span (the span itself, or its farthest ancestor)
        when it is a chain: LangSmith `chain`, OpenInference CHAIN."""
        root = span
        for root in self.ancestors(span):  # noqa: B007
            pass
        return (root.name or "").strip() if self.is_root_chain(root) else None

    @staticmethod
    def is_root_chain(span: _Span) -> bool:
        return (
            span.parent_id is None
            and _is_name(span.name)
            and (
                _upper(span.attributes.get("langsmith.span.kind")) == "CHAIN"
                or _upper(span.attributes.get("openinference.span.kind")) == "CHAIN"
            )
        )

    def _whole_lineage(self, span: _Span) -> bool:
        """Whether every ancestor of the span is in the document: when one is missing (an
        exporter sends spans as they end, the agent's own last), it may yet name the agent,
        and the service's name is no better than waiting for it."""
        last = span
        for last in self.ancestors(span):  # noqa: B007
            pass
        return last.parent_id is None

    def conversation(self, span: _Span) -> str | None:
        for key in CONVERSATION_KEYS:
            for one in self._around(span):
                value = one.attributes.get(key)
                if isinstance(value, str) and value.strip():
                    return value.strip()
        return span.session_id


def _is_name(name: str | None) -> bool:
    return bool(name and name.strip()) and _ENDS_IN_UUID.fullmatch(name or "") is None


def _agent_from_span_name(name: str) -> str:
    """ "invoke_agent support" → support, "agent_run [hello_agent]" → hello_agent."""
    name = name.strip()
    if name.startswith("invoke_agent "):
        name = name[len("invoke_agent ") :].strip()
    bracketed = _BRACKETED.fullmatch(name)
    return bracketed.group(1).strip() if bracketed else name
