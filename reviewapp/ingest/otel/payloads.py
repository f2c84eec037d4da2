"""What a tool's arguments and result come wrapped in, unwrapped: MCP CallToolResult and
content blocks, LangChain ToolMessage, Google ADK function responses. Python reprs (which
LangGraph and any-agent write) are read as literals, never run, and so is a tool message
written as a Python object's text: LangChain's ToolMessage as str() gives it
(`content='{"status": ...}' name='get_order' tool_call_id='call_1'`, what older OpenInference
LangChain instrumentation put in `output.value`) or as repr() does (`ToolMessage(...)`), and
Agno's Message alike (a field that is no literal, an object of its own, is left out).
Placeholders such as ADK's "<not specified>" are no value at all."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Any

from reviewapp.ingest.otel.values import _decode_json_text, _looks_like_json

# Text that says a value is missing, never a value.
_PLACEHOLDER = re.compile(
    r"<\s*(not[ _-]?specified|none|null|unknown|empty|not[ _-]?set|missing)\s*>", re.IGNORECASE
)
_ID_PLACEHOLDERS = frozenset({"none", "null", "undefined", "n/a", "nil"})
MAX_LITERAL_CHARS = 256 * 1024
MAX_ERROR_MESSAGE = 500
MCP_RESULT_KEYS = frozenset({"content", "isError", "structuredContent", "_meta", "meta"})
MCP_BLOCK_KEYS = frozenset({"type", "text", "annotations", "_meta", "meta"})
STRANDS_RESULT_KEYS = frozenset({"toolUseId", "status", "content"})
TOOL_ROLE_KEYS = frozenset({"role", "content", "tool_call_id", "id", "name"})


def is_placeholder(value: Any) -> bool:
    return isinstance(value, str) and _PLACEHOLDER.fullmatch(value.strip()) is not None


def is_id_placeholder(value: str) -> bool:
    text = value.strip()
    return not text or is_placeholder(text) or text.lower() in _ID_PLACEHOLDERS


def _jsonable(value: Any, depth: int = 0) -> tuple[bool, Any]:
    """A Python literal as JSON (tuples become arrays); sets, bytes, complex numbers and
    non-string keys are not JSON."""
    if depth > 64:
        return False, None
    if isinstance(value, str):
        return _storable(value), value
    if value is None or isinstance(value, bool | int):
        return True, value
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf")), value
    if isinstance(value, list | tuple):
        items = []
        for item in value:
            ok, one = _jsonable(item, depth + 1)
            if not ok:
                return False, None
            items.append(one)
        return True, items
    if isinstance(value, dict):
        found = {}
        for key, item in value.items():
            ok, one = _jsonable(item, depth + 1)
            if not ok or not isinstance(key, str) or not _storable(key):
                return False, None
            found[key] = one
        return True, found
    return False, None


def _storable(text: str) -> bool:
    """Not an unpaired surrogate (which a Python escape can make and no database stores)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def python_literal(text: str) -> tuple[bool, Any]:
    """A Python dict or list repr (``{'query': 'example'}``) read as a literal, or (False, None)."""
    if not _looks_like_json(text) or len(text) > MAX_LITERAL_CHARS:
        return False, None
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    if not isinstance(value, dict | list | tuple):
        return False, None
    return _jsonable(value)


def decode_text(text: str) -> tuple[str, Any]:
    """("json" | "python" | "text", value) of a text that may hold JSON or a Python repr."""
    ok, value = _decode_json_text(text)
    if ok:
        return "json", value
    ok, value = python_literal(text)
    if ok:
        return "python", value
    message = tool_message_fields(text)
    if message is not None:
        return "python", message
    return "text", text


_CALL_OPENING = re.compile(r"[A-Za-z_][\w.]*\(")
_FIELD_OPENING = re.compile(r"[A-Za-z_]\w*=")
_MARK = "tool_call_id="


def tool_message_fields(text: str) -> dict[str, Any] | None:
    """The fields of a tool message written as text, as a LangChain ToolMessage dict
    (`{"type": "tool", "content": ..., "tool_call_id": ...}`), or None when the text is no
    such message."""
    if _MARK not in text or len(text) > MAX_LITERAL_CHARS:
        return None
    stripped = text.strip()
    if _CALL_OPENING.match(stripped) and stripped.endswith(")"):
        fields = _keyword_literals(stripped)
    elif _FIELD_OPENING.match(stripped):
        fields = _keyword_literals(_as_call(stripped))
    else:
        return None
    if not fields or "content" not in fields or not isinstance(fields.get("tool_call_id"), str):
        return None
    return {**fields, "type": "tool"}


def _as_call(text: str) -> str:
    """`a=1 b='x y'` (pydantic's str: fields separated by spaces) as `f(a=1, b='x y')`: a
    comma goes before each `name=` outside brackets, found by Python's own tokenizer, so
    that a space or `=` inside a string is left alone."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return ""
    line_starts = [0]
    for line in text.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    cuts, depth = [], 0
    for index, token in enumerate(tokens):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif (
            depth == 0
            and index > 0
            and token.type == tokenize.NAME
            and index + 1 < len(tokens)
            and tokens[index + 1].string == "="
        ):
            row, column = token.start
            cuts.append(line_starts[row - 1] + column)
    parts, last = [], 0
    for cut in cuts:
        parts.append(text[last:cut].rstrip())
        last = cut
    parts.append(text[last:])
    return "f(" + ", ".join(parts) + ")"


def _keyword_literals(source: str) -> dict[str, Any] | None:
    try:
        node = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(node, ast.Call) or node.args or not node.keywords:
        return None
    found: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            return None
        try:
            value = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue  # an object of its own (metrics=Metrics(...)): not a literal, left out
        ok, value = _jsonable(value)
        if ok:
            found[keyword.arg] = value
    return found


@dataclass
class Unwrapped:
    """A result out of its envelopes: the payload, the errors the envelope states, the call
    id it carries, and which envelopes there were."""

    payload: Any
    errors: list[dict[str, Any]] = field(default_factory=list)
    call_id: str | None = None
    envelopes: list[str] = field(default_factory=list)


def _short(text: Any) -> str:
    text = text if isinstance(text, str) else str(text)
    return text if len(text) <= MAX_ERROR_MESSAGE else text[: MAX_ERROR_MESSAGE - 3] + "..."


def _from_text(value: Any) -> Any:
    if isinstance(value, str):
        kind, decoded = decode_text(value)
        if kind != "text" and isinstance(decoded, dict | list):
            return decoded
    return value


def _text_blocks(blocks: list) -> str | None:
    """The text of content blocks when every block is text: MCP's `{"type": "text", "text"}`
    or Bedrock's and Strands' `{"text"}`."""
    texts = []
    for block in blocks:
        if not isinstance(block, dict) or not isinstance(block.get("text"), str):
            return None
        if block.get("type", "text") != "text" or not set(block) <= MCP_BLOCK_KEYS:
            return None
        texts.append(block["text"])
    return "\n".join(texts)


def _json_block(blocks: list) -> tuple[bool, Any]:
    """The value of a lone Bedrock / Strands `{"json": ...}` content block."""
    if len(blocks) == 1 and isinstance(blocks[0], dict) and set(blocks[0]) == {"json"}:
        return True, blocks[0]["json"]
    return False, None


def _tool_message(value: dict) -> dict | None:
    """The fields of a LangChain ToolMessage: serialized (`lc` constructor), as
    `message_to_dict` writes it (`{"type": "tool", "data": {...}}`, as OpenInference's
    LangChain instrumentation does) or as a dict."""
    ids = value.get("id")
    if (
        value.get("lc") == 1
        and value.get("type") == "constructor"
        and isinstance(ids, list)
        and ids
        and ids[-1] == "ToolMessage"
        and isinstance(value.get("kwargs"), dict)
    ):
        return value["kwargs"]
    if value.get("type") == "tool" and "tool_call_id" in value and "content" in value:
        return value
    data = value.get("data")
    if (
        value.get("type") == "tool"
        and isinstance(data, dict)
        and "tool_call_id" in data
        and "content" in data
    ):
        return data
    return None


def _keep_call_id(found: Unwrapped, call_id: Any) -> None:
    if isinstance(call_id, str) and not is_id_placeholder(call_id):
        found.call_id = found.call_id or call_id


def is_tool_message(value: Any) -> bool:
    return isinstance(value, dict) and _tool_message(value) is not None


def _step(value: Any, found: Unwrapped) -> Any | None:
    """One envelope off `value`, or None when it wears none."""
    if isinstance(value, dict):
        mcp = "mcp" in found.envelopes  # inside an MCP result: a tool's own "content"
        if isinstance(value.get("content"), list) and set(value) <= MCP_RESULT_KEYS and not mcp:
            found.envelopes.append("mcp")
            text = _text_blocks(value["content"])
            if value.get("isError") is True:
                message = text if text else "the tool result has isError: true"
                found.errors.append({"code": "TOOL_ERROR", "message": _short(message)})
            if value.get("structuredContent") is not None:
                return value["structuredContent"]
            return _from_text(text) if text is not None else value["content"]
        if (
            value.get("type") == "text"
            and isinstance(value.get("text"), str)
            and set(value) <= MCP_BLOCK_KEYS
        ):
            found.envelopes.append("mcp")
            return _from_text(value["text"])
        if set(value) == {"output"} and is_tool_message(value["output"]):
            return value["output"]  # a LangChain tool run's outputs: {"output": ToolMessage}
        if (
            isinstance(value.get("toolUseId"), str)
            and isinstance(value.get("content"), list)
            and set(value) <= STRANDS_RESULT_KEYS
        ):  # a Strands / Bedrock ToolResult
            found.envelopes.append("strands")
            _keep_call_id(found, value["toolUseId"])
            if value.get("status") == "error":
                text = _text_blocks(value["content"])
                found.errors.append({"code": "TOOL_ERROR", "message": _short(text or "error")})
            return value["content"]
        if value.get("role") == "tool" and "content" in value and set(value) <= TOOL_ROLE_KEYS:
            found.envelopes.append("tool-message")  # a chat tool message (OpenAI, GenAI events)
            _keep_call_id(found, value.get("tool_call_id", value.get("id")))
            return _from_text(value["content"])
        if value.get("type") == "tool_call_response" and "response" in value:
            found.envelopes.append("genai-part")  # a GenAI convention message part
            _keep_call_id(found, value.get("id"))
            return _from_text(value["response"])
        fields = _tool_message(value)
        if fields is not None:
            found.envelopes.append("langchain")
            call_id = fields.get("tool_call_id")
            if isinstance(call_id, str) and not is_id_placeholder(call_id):
                found.call_id = found.call_id or call_id
            content = fields.get("content")
            if fields.get("status") == "error":
                found.errors.append({"code": "TOOL_ERROR", "message": _short(content)})
            return _from_text(content)
        if "response" in value and len(value) > 1 and set(value) <= {"id", "name", "response"}:
            found.envelopes.append("adk")
            call_id = value.get("id")
            if isinstance(call_id, str) and not is_id_placeholder(call_id):
                found.call_id = found.call_id or call_id
            return value["response"]
    if isinstance(value, list) and value:
        text = _text_blocks(value)
        if text is not None:
            typed = all("type" in block for block in value)
            found.envelopes.append("mcp" if typed else "content-blocks")
            return _from_text(text)
        ok, inner = _json_block(value)
        if ok:
            found.envelopes.append("content-blocks")
            return inner
    return None


def unwrap(value: Any) -> Unwrapped:
    found = Unwrapped(value)
    for _ in range(8):
        inner = _step(found.payload, found)
        if inner is None:
            break
        found.payload = inner
    if isinstance(found.payload, dict):
        status = found.payload.get("response_status", found.payload.get("status"))
        if isinstance(status, str) and status.strip().lower() == "error":
            message = found.payload.get("message") or found.payload.get("error") or status
            found.errors.append({"code": "TOOL_ERROR", "message": _short(message)})
    return found


def looks_like_schema(value: Any) -> bool:
    """A JSON Schema (what OpenInference's tool.parameters often holds), not arguments."""
    return (
        isinstance(value, dict)
        and value.get("type") == "object"
        and isinstance(value.get("properties"), dict)
    )
