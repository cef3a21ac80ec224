"""Cohere, two ways.

(a) The official cohere SDK (`cohere.ClientV2`) pointed straight at the mock's
    `POST /v2/chat`, proving the mock speaks the v2 protocol (JSON answers, typed SSE
    events, `{"message"}` errors) well enough for the real client.
(b) The official OpenAI SDK through Tollgate's `cohere` adapter to the same route,
    with `cohere/<model>` from the built-in catalog (the conftest points the provider
    at the mock root and adds the fault models `cohere/limited` (fail-429) and
    `cohere/throttled` (ratelimit-2)).
"""

import json
from decimal import Decimal

import cohere
import openai
import pytest
from cohere import errors as cohere_errors
from pydantic import BaseModel

MODEL = "cohere/command-a-03-2025"


class Person(BaseModel):
    name: str
    age: int


def last_cohere_request(stack):
    return stack.last_upstream_request("/v2/chat")


@pytest.fixture()
def co(stack):
    # No retries: the fault tests want the first answer, not a backoff.
    return cohere.ClientV2(api_key="test-key", base_url=stack.mock_url, max_retries=0)


WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


# --------------------------------------------------------------- (a) cohere SDK → mock


def test_sdk_chat(co, stack):
    response = co.chat(
        model="command-a-03-2025",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello cohere"}],
        temperature=0.3,
        max_tokens=50,
    )
    assert response.message.content[0].text == "You said: hello cohere"
    assert response.finish_reason == "COMPLETE"
    assert response.id.startswith("mock-cohere-")
    # system (2 words + 4) + user (2 words + 4); 4 words answered.
    assert response.usage.billed_units.input_tokens == 12
    assert response.usage.billed_units.output_tokens == 4
    # `tokens` also counts the mock's pretend prompt template (100 tokens).
    assert response.usage.tokens.input_tokens == 112
    capped = co.chat(model="command-a-03-2025", messages=[{"role": "user", "content": "a b c"}], max_tokens=1)
    assert capped.finish_reason == "MAX_TOKENS"
    assert capped.message.content[0].text == "You"
    sent = last_cohere_request(stack)
    assert sent["headers"]["authorization"] == "Bearer test-key"
    assert sent["body"]["stream"] is False


def test_sdk_chat_stream(co):
    events = list(co.chat_stream(model="command-r-08-2024", messages=[{"role": "user", "content": "one two three"}]))
    kinds = [e.type for e in events]
    assert kinds[0] == "message-start" and kinds[-1] == "message-end"
    assert kinds.count("content-delta") == 5
    text = "".join(e.delta.message.content.text for e in events if e.type == "content-delta")
    assert text == "You said: one two three"
    end = events[-1]
    assert end.delta.finish_reason == "COMPLETE"
    assert end.delta.usage.billed_units.output_tokens == 5


def test_sdk_tool_call_and_result(co):
    question = {"role": "user", "content": "weather in Paris?"}
    first = co.chat(model="command-a-03-2025", messages=[question], tools=WEATHER, tool_choice="REQUIRED")
    assert first.finish_reason == "TOOL_CALL"
    call = first.message.tool_calls[0]
    assert call.id.startswith("get_weather_")
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "mock"}

    follow_up = co.chat(
        model="command-a-03-2025",
        tools=WEATHER,
        messages=[
            question,
            {"role": "assistant", "tool_plan": first.message.tool_plan, "tool_calls": first.message.tool_calls},
            {
                "role": "tool",
                "tool_call_id": call.id,
                "content": [{"type": "document", "document": {"data": json.dumps({"forecast": "sunny"})}}],
            },
        ],
    )
    assert follow_up.message.content[0].text == 'Tool result: {"forecast": "sunny"}'


def test_sdk_streamed_tool_call(co):
    events = list(
        co.chat_stream(model="command-a-03-2025", messages=[{"role": "user", "content": "look it up"}], tools=WEATHER)
    )
    start = next(e for e in events if e.type == "tool-call-start")
    assert start.delta.message.tool_calls.function.name == "get_weather"
    arguments = "".join(
        e.delta.message.tool_calls.function.arguments for e in events if e.type == "tool-call-delta"
    )
    assert json.loads(arguments) == {"city": "mock"}
    assert events[-1].delta.finish_reason == "TOOL_CALL"


def test_sdk_structured_output(co):
    response = co.chat(
        model="command-a-03-2025",
        messages=[{"role": "user", "content": "Ada, 36"}],
        response_format={"type": "json_object", "json_schema": Person.model_json_schema()},
    )
    assert Person.model_validate_json(response.message.content[0].text) == Person(name="mock", age=1)


def test_sdk_raises_typed_errors(co):
    with pytest.raises(cohere_errors.TooManyRequestsError) as limited:
        co.chat(model="fail-429", messages=[{"role": "user", "content": "hi"}])
    assert limited.value.status_code == 429
    assert limited.value.body["message"].startswith("too many requests")
    with pytest.raises(cohere_errors.ServiceUnavailableError):
        co.chat(model="fail-503", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(cohere_errors.InvalidTokenError):
        co.chat(model="fail-498", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(cohere_errors.BadRequestError) as invalid:
        # Cohere's p is 0.01..0.99: the mock refuses 1.0 as Cohere does.
        co.chat(model="command-a-03-2025", messages=[{"role": "user", "content": "hi"}], p=1.0)
    assert invalid.value.body["message"].startswith("invalid request: p must be between")
    with pytest.raises(cohere_errors.TooManyRequestsError):
        list(co.chat_stream(model="fail-429", messages=[{"role": "user", "content": "hi"}]))
    # A failure mid-stream is a message-end carrying the error.
    events = list(co.chat_stream(model="ratelimit-2", messages=[{"role": "user", "content": "a b c"}]))
    assert events[-1].delta.finish_reason == "ERROR"
    assert events[-1].delta.error.startswith("too many requests")


# --------------------------------------------------------------- (b) OpenAI SDK → Tollgate → mock


def test_plain_chat_is_translated_to_v2_chat(client, stack):
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello cohere"}],
        temperature=0.2,
        max_tokens=50,
        stop=["END"],
    )
    body = completion.to_dict()
    assert completion.choices[0].message.content == "You said: hello cohere"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == MODEL
    assert body["service"]["upstream_model"] == "command-a-03-2025"
    assert completion.id.startswith("chatcmpl-mock-cohere-")
    assert completion.created > 0
    assert body["provider"] == "cohere"
    # Billed units, not `tokens` (which adds the prompt template).
    assert body["usage"]["prompt_tokens"] == 12
    assert body["usage"]["completion_tokens"] == 4
    # At 2.50 / 10.00 USD per Mtok.
    assert Decimal(str(body["usage"]["cost"])) == Decimal(12 * 2500 + 4 * 10000) / Decimal(10**9)

    sent = last_cohere_request(stack)
    assert sent["headers"]["authorization"] == "Bearer test-key"
    assert sent["body"] == {
        "model": "command-a-03-2025",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello cohere"}],
        "temperature": 0.2,
        "max_tokens": 50,
        "stop_sequences": ["END"],
    }


def test_length_and_stop_sequence_finish_reasons(client):
    cut = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "one two three"}], max_tokens=2
    )
    assert cut.choices[0].message.content == "You said:"
    assert cut.choices[0].finish_reason == "length"
    assert cut.usage.completion_tokens == 2
    stopped = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "one two three"}], stop="two"
    )
    assert stopped.choices[0].message.content == "You said: one "
    assert stopped.choices[0].finish_reason == "stop"
    stream = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "one two three"}], max_tokens=2, stream=True
    )
    finishes = [c.choices[0].finish_reason for c in stream if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]


def test_image_parts_pass_through(client, stack):
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}}
    completion = client.chat.completions.create(
        model="cohere/command-a-vision-07-2025",
        messages=[{"role": "user", "content": [{"type": "text", "text": "what is this"}, image]}],
    )
    assert completion.choices[0].message.content == "You said: what is this"
    assert last_cohere_request(stack)["body"]["messages"][0]["content"][1] == image


def test_streaming(client, stack):
    stream = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "one two three"}], stream=True
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: one two three"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    final = chunks[-1].to_dict()
    assert final["usage"]["prompt_tokens"] == 7
    assert final["usage"]["completion_tokens"] == 5
    assert final["service"]["request_id"].startswith("req_")
    sent = last_cohere_request(stack)["body"]
    assert sent["stream"] is True
    # The gateway's output cap is sent when the caller gives none.
    assert sent["max_tokens"] > 0


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather",
            "strict": True,
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
]


def test_tool_call_round_trip(client, stack):
    question = {"role": "user", "content": "weather in Paris?"}
    first = client.chat.completions.create(model=MODEL, messages=[question], tools=TOOLS, tool_choice="required")
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.id.startswith("get_weather_")
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "mock"}
    sent = last_cohere_request(stack)["body"]
    assert sent["tool_choice"] == "REQUIRED"
    assert sent["strict_tools"] is True
    assert sent["tools"][0] == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather",
            "parameters": TOOLS[0]["function"]["parameters"],
        },
    }

    follow_up = client.chat.completions.create(
        model=MODEL,
        tools=TOOLS,
        messages=[question, choice.message.to_dict(), {"role": "tool", "tool_call_id": call.id, "content": "sunny"}],
    )
    assert follow_up.choices[0].message.content == "Tool result: sunny"
    messages = last_cohere_request(stack)["body"]["messages"]
    assert messages[1] == {
        "role": "assistant",
        "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"mock"}'}}
        ],
    }
    assert messages[2] == {"role": "tool", "tool_call_id": call.id, "content": "sunny"}


def test_named_tool_choice_offers_only_that_tool(client, stack):
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "what time is it?"}],
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    )
    assert completion.choices[0].message.tool_calls[0].function.name == "get_time"
    sent = last_cohere_request(stack)["body"]
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_time"]
    assert sent["tool_choice"] == "REQUIRED"


def test_streamed_tool_call_deltas(client):
    stream = client.chat.completions.create(
        model=MODEL, stream=True, messages=[{"role": "user", "content": "look it up"}], tools=TOOLS
    )
    calls = []
    finish = None
    for chunk in stream:
        if chunk.choices:
            calls += chunk.choices[0].delta.tool_calls or []
            finish = chunk.choices[0].finish_reason or finish
    started = [(c.index, c.function.name) for c in calls if c.id]
    assert started == [(0, "get_weather")]
    assert calls[0].id.startswith("get_weather_")
    # The arguments arrive in several fragments, all for index 0.
    assert len(calls) > 2 and all(c.index == 0 for c in calls)
    assert json.loads("".join(c.function.arguments or "" for c in calls)) == {"city": "mock"}
    assert finish == "tool_calls"


def test_json_schema(client, stack):
    completion = client.chat.completions.parse(
        model=MODEL, messages=[{"role": "user", "content": "Ada, 36"}], response_format=Person
    )
    assert completion.choices[0].message.parsed == Person(name="mock", age=1)
    fmt = last_cohere_request(stack)["body"]["response_format"]
    assert fmt["type"] == "json_object"
    assert fmt["json_schema"]["properties"] == {
        "name": {"title": "Name", "type": "string"},
        "age": {"title": "Age", "type": "integer"},
    }
    assert fmt["json_schema"]["required"] == ["name", "age"]


def test_json_mode(client, stack):
    completion = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], response_format={"type": "json_object"}
    )
    assert json.loads(completion.choices[0].message.content) == {"reply": "You said: hi"}
    assert last_cohere_request(stack)["body"]["response_format"] == {"type": "json_object"}


def test_rate_limit_maps_to_upstream_rate_limited(client):
    # A lone candidate's 429 reaches the caller as a 429 (docs/errors.md).
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(model="cohere/limited", messages=[{"role": "user", "content": "hi"}])
    assert limited.value.status_code == 429
    assert limited.value.code == "upstream_rate_limited"
    assert "too many requests" in limited.value.message


def test_mid_stream_rate_limit_continues_on_the_fallback(client, stack):
    stream = client.chat.completions.create(
        model="cohere/throttled",
        stream=True,
        messages=[{"role": "user", "content": "one two three four five"}],
        extra_body={"models": [MODEL]},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: one two three four five"
    attempts = chunks[-1].to_dict()["service"]["attempts"]
    assert [a["model"] for a in attempts] == ["ratelimit-2", "command-a-03-2025"]
    sent = last_cohere_request(stack)["body"]["messages"]
    if sent[-1]["role"] == "assistant":
        # The fallback got the partial answer as a trailing assistant turn.
        assert sent[-1] == {"role": "assistant", "content": "You said:"}
    else:
        # Under load the rate-limit frame can arrive with the first chunks,
        # before any content was relayed: the fallback then starts over,
        # invisibly to the caller (the text above is still whole).
        assert sent[-1] == {"role": "user", "content": "one two three four five"}


def test_unknown_tool_result_ids_are_refused(client):
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model=MODEL,
            messages=[
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "call_9", "content": "orphan"},
            ],
        )
    assert "call_9" in refused.value.message
