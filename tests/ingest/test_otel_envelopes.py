"""Read means comparable (issue 27): a tool call's value holds what the tool returned, out of
every envelope its framework adds, with the decision fields (`status`, `amount`) at the top;
its call id is the framework's; arguments and results written in span events, or on the
model's spans, are read. Each span below is written the way its framework writes it
(Strands' telemetry/tracer.py, OpenInference's LangChain tracer, MCP's CallToolResult, the
GenAI semantic conventions before and after v1.37)."""

import json

from reviewapp.ingest.otel import convert_document
from reviewapp.ingest.otel.payloads import decode_text, unwrap
from tests.ingest.test_otel import check, key_values, otlp

TRACE = "0af7651916cd43dd8448eb211c80319c"
ORDER = {"orderId": "A-1", "status": "refunded", "amount": 12.5}


def span(span_id, name, attributes, events=(), parent=None):
    found = {
        "traceId": TRACE,
        "spanId": span_id,
        "name": name,
        "startTimeUnixNano": "1796002151368000000",
        "endTimeUnixNano": "1796002151468000000",
        "attributes": key_values(attributes),
        "events": [
            {"timeUnixNano": "1796002151368000001", "name": event, "attributes": key_values(attrs)}
            for event, attrs in events
        ],
        "status": {"code": 1},
    }
    if parent:
        found["parentSpanId"] = parent
    return found


def calls(*spans):
    """[(tool_call, tool_observation)] of a document of these spans."""
    records = convert_document(otlp(*spans))
    check(records)
    tools = [record for record in records if record["type"] != "run_started"]
    return list(zip(tools[::2], tools[1::2], strict=True))


def strands_tool(attributes, events):
    return span(
        "b7ad6b7169203331",
        "execute_tool get_order",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_order",
            "gen_ai.tool.call.id": "tooluse_Qk3x",
            "gen_ai.tool.status": "success",
            **attributes,
        },
        events,
    )


def test_strands_events_before_the_latest_convention():
    # start_tool_call_span: gen_ai.tool.message holds the input; end_tool_call_span:
    # gen_ai.choice holds the ToolResult's content blocks, the dict as str() writes it.
    tool = strands_tool(
        {"gen_ai.system": "strands-agents"},
        [
            (
                "gen_ai.tool.message",
                {"role": "tool", "content": '{"order_id": "A-1"}', "id": "tooluse_Qk3x"},
            ),
            (
                "gen_ai.choice",
                {"message": json.dumps([{"text": str(ORDER)}]), "id": "tooluse_Qk3x"},
            ),
        ],
    )
    ((call, observation),) = calls(tool)
    assert (call["tool"], call["toolCallId"]) == ("get_order", "tooluse_Qk3x")
    assert call["arguments"] == {"order_id": "A-1"}
    assert observation["value"]["status"] == "refunded"
    assert observation["value"]["amount"] == 12.5
    assert observation["resultEnvelope"] == "content-blocks"


def test_strands_events_in_the_latest_convention():
    inputs = [
        {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call",
                    "name": "get_order",
                    "id": "tooluse_Qk3x",
                    "arguments": {"order_id": "A-1"},
                }
            ],
        }
    ]
    outputs = [
        {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": "tooluse_Qk3x",
                    "response": [{"json": ORDER}],
                }
            ],
        }
    ]
    details = "gen_ai.client.inference.operation.details"
    tool = strands_tool(
        {"gen_ai.provider.name": "strands-agents"},
        [
            (details, {"gen_ai.input.messages": json.dumps(inputs)}),
            (details, {"gen_ai.output.messages": json.dumps(outputs)}),
        ],
    )
    ((call, observation),) = calls(tool)
    assert call["toolCallId"] == "tooluse_Qk3x"
    assert call["arguments"] == {"order_id": "A-1"}
    assert observation["value"] == ORDER


def test_strands_tool_result_envelope_and_its_error():
    result = {
        "toolUseId": "tooluse_Qk3x",
        "status": "error",
        "content": [{"text": "Error: order A-9 not found"}],
    }
    tool = strands_tool({"gen_ai.tool.call.result": json.dumps(result)}, [])
    ((_, observation),) = calls(tool)
    assert observation["errors"] == [
        {"code": "TOOL_ERROR", "message": "Error: order A-9 not found"}
    ]
    assert observation["value"] == {"result": "Error: order A-9 not found"}
    ok = {**result, "status": "success", "content": [{"text": json.dumps(ORDER)}]}
    ((_, observation),) = calls(strands_tool({"gen_ai.tool.call.result": json.dumps(ok)}, []))
    assert observation["value"]["status"] == "refunded"  # the order's, not the envelope's
    assert "errors" not in observation


def langchain_llm_span():
    """The chat model's OpenInference span: the tool call it made, with its arguments."""
    prefix = "llm.output_messages.0.message"
    return span(
        "a1b2c3d4e5f60718",
        "ChatOpenAI",
        {
            "openinference.span.kind": "LLM",
            f"{prefix}.role": "assistant",
            f"{prefix}.tool_calls.0.tool_call.id": "call_Zx81",
            f"{prefix}.tool_calls.0.tool_call.function.name": "get_order",
            f"{prefix}.tool_calls.0.tool_call.function.arguments": '{"order_id": "A-1"}',
        },
    )


def langchain_tool_span(output):
    return span(
        "c2d3e4f5a6b70819",
        "get_order",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "get_order",
            "tool.description": "Look an order up.",
            "input.value": "A-1",  # a one-argument tool: OpenInference keeps the bare value
            "output.value": json.dumps(output),
            "output.mime_type": "application/json",
        },
    )


TOOL_MESSAGE = {  # ToolMessage.model_dump(), as OpenInference's _json_dumps writes it
    "content": json.dumps(ORDER),
    "additional_kwargs": {},
    "response_metadata": {},
    "type": "tool",
    "name": "get_order",
    "id": None,
    "tool_call_id": "call_Zx81",
    "artifact": None,
    "status": "success",
}


def test_langchain_tool_message_through_openinference():
    ((call, observation),) = calls(langchain_llm_span(), langchain_tool_span(TOOL_MESSAGE))
    assert (call["tool"], call["toolCallId"]) == ("get_order", "call_Zx81")
    assert "syntheticToolCallId" not in call
    assert call["arguments"] == {"order_id": "A-1"}  # as the model's tool call named it
    assert observation["value"]["status"] == "refunded"  # not the message's "success"
    assert observation["resultEnvelope"] == "langchain"


def test_langchain_run_outputs_with_a_serialized_tool_message():
    serialized = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "ToolMessage"],
        "kwargs": {k: TOOL_MESSAGE[k] for k in ("content", "type", "name", "tool_call_id")},
    }
    ((call, observation),) = calls(langchain_tool_span({"output": serialized}))
    assert call["toolCallId"] == "call_Zx81"
    assert observation["value"]["amount"] == 12.5
    # No model span to name the argument: a one-property schema does.
    schema = {"type": "object", "properties": {"order_id": {"type": "string"}}}
    tool = langchain_tool_span(TOOL_MESSAGE)
    tool["attributes"] += key_values({"tool.parameters": json.dumps(schema)})
    ((call, _),) = calls(tool)
    assert call["arguments"] == {"order_id": "A-1"}


# str() and repr() of ToolMessage(content=json.dumps(ORDER), name="get_order",
# tool_call_id="call_Zx81"), as langchain-core 1.8.3 writes them: the text older
# OpenInference LangChain instrumentation put in output.value.
TOOL_MESSAGE_STR = (
    """content='{"orderId": "A-1", "status": "refunded", "amount": 12.5}' name='get_order' """
    "tool_call_id='call_Zx81'"
)
TOOL_MESSAGE_REPR = (
    """ToolMessage(content='{"orderId": "A-1", "status": "refunded", "amount": 12.5}', """
    "name='get_order', tool_call_id='call_Zx81')"
)


def test_a_tool_message_written_as_python_text_is_read_as_one():
    for text in (TOOL_MESSAGE_STR, TOOL_MESSAGE_REPR):
        tool = langchain_tool_span({})
        for attribute in tool["attributes"]:
            if attribute["key"] == "output.value":
                attribute["value"] = {"stringValue": text}
        ((call, observation),) = calls(tool)
        assert call["toolCallId"] == "call_Zx81" and "syntheticToolCallId" not in call
        assert observation["value"] == ORDER
        assert (observation["resultEnvelope"], observation["resultEncoding"]) == (
            "langchain",
            "python-repr",
        )


def test_a_message_text_is_read_as_literals_only():
    # Agno's Message str(): fields that are objects of their own are left out, never run; an
    # error status is the tool's error; text that merely mentions tool_call_id= stays text.
    agno = (
        "content=\"it's gone, see 'x=1'\" name=None tool_call_id='call_9' role='tool' "
        "metrics=MessageMetrics(input_tokens=3) status='error' images=None"
    )
    assert decode_text(agno) == (
        "python",
        {
            "content": "it's gone, see 'x=1'",
            "name": None,
            "tool_call_id": "call_9",
            "role": "tool",
            "status": "error",
            "images": None,
            "type": "tool",
        },
    )
    found = unwrap(decode_text(agno)[1])
    assert found.call_id == "call_9" and found.errors[0]["code"] == "TOOL_ERROR"
    for text in (
        "the call tool_call_id='x' failed",
        "content='a' tool_call_id=__import__('os').getcwd()",  # not a literal: no id
        "ToolMessage('positional', tool_call_id='x')",
    ):
        assert decode_text(text) == ("text", text)


def test_mcp_call_tool_result_structured_and_text():
    structured = {
        "content": [{"type": "text", "text": json.dumps(ORDER)}],
        "structuredContent": ORDER,
        "isError": False,
    }
    mcp = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "get_order",
        "jsonrpc.request.id": "3",
        "gen_ai.tool.call.arguments": '{"order_id": "A-1"}',
    }
    for result in (structured, {"content": structured["content"]}):
        tool = span(
            "d3e4f5a6b7c8091a", "tools/call get_order", {**mcp, "output.value": json.dumps(result)}
        )
        ((call, observation),) = calls(tool)
        assert (call["tool"], call["arguments"]) == ("get_order", {"order_id": "A-1"})
        assert observation["value"]["status"] == "refunded"
        assert observation["resultEnvelope"] == "mcp"


def test_events_that_carry_the_call_attributes():
    tool = span(
        "e4f5a6b7c8d9012b",
        "execute_tool get_order",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_order"},
        [
            (
                "gen_ai.tool.call",
                {
                    "gen_ai.tool.call.id": "call_7",
                    "gen_ai.tool.call.arguments": '{"order_id": "A-1"}',
                },
            ),
            ("gen_ai.tool.result", {"gen_ai.tool.call.result": json.dumps(ORDER)}),
        ],
    )
    ((call, observation),) = calls(tool)
    assert (call["toolCallId"], call["arguments"]) == ("call_7", {"order_id": "A-1"})
    assert observation["value"]["status"] == "refunded"


def test_older_convention_events_on_the_model_spans_name_the_call():
    # v1.36: the chat span's gen_ai.choice carries the model's tool calls; the next chat
    # span's gen_ai.tool.message carries the tool's result back to the model.
    choice = {
        "index": 0,
        "finish_reason": "tool_calls",
        "message": json.dumps(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "call_Vd2",
                        "type": "function",
                        "function": {"name": "get_order", "arguments": '{"order_id": "A-1"}'},
                    }
                ],
            }
        ),
    }
    first = span(
        "f5a6b7c8d9e0123c",
        "chat gpt-4o",
        {"gen_ai.operation.name": "chat"},
        [("gen_ai.choice", choice)],
    )
    tool = span(
        "a6b7c8d9e0f1234d",
        "execute_tool get_order",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_order",
            "gen_ai.tool.call.id": "call_Vd2",
        },
    )
    second = span(
        "b7c8d9e0f1a2345e",
        "chat gpt-4o",
        {"gen_ai.operation.name": "chat"},
        [("gen_ai.tool.message", {"role": "tool", "id": "call_Vd2", "content": json.dumps(ORDER)})],
    )
    ((call, observation),) = calls(first, tool, second)
    assert (call["toolCallId"], call["arguments"]) == ("call_Vd2", {"order_id": "A-1"})
    assert observation["value"]["status"] == "refunded"


def test_latest_convention_message_attributes_on_the_model_spans():
    outputs = [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_Q9",
                    "name": "get_order",
                    "arguments": {"order_id": "A-1"},
                }
            ],
        }
    ]
    inputs = [
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "call_Q9", "response": ORDER}],
        }
    ]
    first = span(
        "c8d9e0f1a2b3456f",
        "chat gpt-4o",
        {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(outputs)},
    )
    tool = span(
        "d9e0f1a2b3c45670",
        "execute_tool get_order",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_order",
            "gen_ai.tool.call.id": "call_Q9",
        },
    )
    second = span(
        "e0f1a2b3c4d56781",
        "chat gpt-4o",
        {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(inputs)},
    )
    ((call, observation),) = calls(first, tool, second)
    assert call["arguments"] == {"order_id": "A-1"}
    assert observation["value"] == ORDER
