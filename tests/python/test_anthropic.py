"""Anthropic, two ways.

(a) The official anthropic SDK pointed straight at the mock's Messages API
    (`POST /v1/messages`), proving the mock speaks the protocol well enough for
    the real client, streaming included.
(b) The official OpenAI SDK through Tollgate's `anthropic` adapter to the same
    route, with `anthropic/<model>` from the built-in catalog (the conftest
    points the provider at the mock and adds the fault models
    `anthropic/limited` (fail-429) and `anthropic/throttled` (ratelimit-2)).
"""

import json
from decimal import Decimal

import anthropic
import openai
import pytest
from pydantic import BaseModel

MODEL = "anthropic/claude-haiku-4-5"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="


class Person(BaseModel):
    name: str
    age: int


def last_messages_request(stack):
    return stack.last_upstream_request("/v1/messages")


@pytest.fixture()
def aclient(stack):
    client = anthropic.Anthropic(api_key="test-key", base_url=stack.mock_url, max_retries=0)
    yield client
    client.close()


WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


# --------------------------------------------------------------- (a) anthropic SDK → mock


def test_sdk_create(aclient, stack):
    message = aclient.messages.create(
        model="claude-haiku-4-5",
        max_tokens=50,
        system="Be brief.",
        messages=[{"role": "user", "content": "hello claude"}],
    )
    assert message.content[0].type == "text"
    assert message.content[0].text == "You said: hello claude"
    assert message.stop_reason == "end_turn"
    assert message.model == "claude-haiku-4-5"
    assert message.id.startswith("msg_mock_")
    # system (2 words + 4) + user (2 words + 4); 4 words answered.
    assert message.usage.input_tokens == 12
    assert message.usage.output_tokens == 4
    assert message.usage.cache_read_input_tokens == 0
    sent = last_messages_request(stack)
    # anthropic 2.x sends the API key as a bearer token; the gateway uses x-api-key.
    assert sent["headers"]["authorization"] == "Bearer test-key"
    # This SDK pins a newer API version than the adapter's 2023-06-01; the mock serves both.
    assert sent["headers"]["anthropic-version"]


def test_sdk_stop_sequences_and_max_tokens(aclient):
    stopped = aclient.messages.create(
        model="claude-haiku-4-5",
        max_tokens=50,
        stop_sequences=["three"],
        messages=[{"role": "user", "content": "one two three four"}],
    )
    assert stopped.content[0].text == "You said: one two "
    assert (stopped.stop_reason, stopped.stop_sequence) == ("stop_sequence", "three")
    capped = aclient.messages.create(
        model="claude-haiku-4-5", max_tokens=3, messages=[{"role": "user", "content": "one two three four"}]
    )
    assert capped.content[0].text == "You said: one"
    assert capped.stop_reason == "max_tokens"
    assert capped.usage.output_tokens == 3


def test_sdk_stream(aclient, stack):
    with aclient.messages.stream(
        model="claude-haiku-4-5", max_tokens=50, messages=[{"role": "user", "content": "one two three"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "You said: one two three"
    assert final.content[0].text == text
    assert final.stop_reason == "end_turn"
    assert final.usage.input_tokens == 7
    assert final.usage.output_tokens == 5
    assert last_messages_request(stack)["body"]["stream"] is True


def test_sdk_tool_use_round_trip(aclient):
    question = {"role": "user", "content": "weather in Paris?"}
    first = aclient.messages.create(
        model="claude-haiku-4-5",
        max_tokens=100,
        tools=[WEATHER],
        tool_choice={"type": "any"},
        messages=[question],
    )
    assert first.stop_reason == "tool_use"
    call = first.content[0]
    assert call.type == "tool_use"
    assert call.name == "get_weather"
    assert call.input == {"city": "mock"}
    assert call.id.startswith("toolu_mock_")

    follow_up = aclient.messages.create(
        model="claude-haiku-4-5",
        max_tokens=100,
        tools=[WEATHER],
        messages=[
            question,
            {"role": "assistant", "content": [block.model_dump() for block in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]},
        ],
    )
    assert follow_up.content[0].text == "Tool result: sunny"
    assert follow_up.stop_reason == "end_turn"


def test_sdk_streamed_tool_use(aclient):
    with aclient.messages.stream(
        model="claude-haiku-4-5", max_tokens=100, tools=[WEATHER], messages=[{"role": "user", "content": "look"}]
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert final.content[0].input == {"city": "mock"}


def test_sdk_structured_output(aclient, stack):
    parsed = aclient.messages.parse(
        model="claude-haiku-4-5", max_tokens=100, messages=[{"role": "user", "content": "Ada, 36"}], output_format=Person
    )
    assert parsed.parsed_output == Person(name="mock", age=1)
    fmt = last_messages_request(stack)["body"]["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert fmt["schema"]["additionalProperties"] is False


def test_sdk_raises_typed_errors(aclient):
    hi = [{"role": "user", "content": "hi"}]
    with pytest.raises(anthropic.RateLimitError) as limited:
        aclient.messages.create(model="fail-429", max_tokens=10, messages=hi)
    assert limited.value.status_code == 429
    assert limited.value.body["error"]["type"] == "rate_limit_error"
    with pytest.raises(anthropic.OverloadedError) as overloaded:
        aclient.messages.create(model="fail-529", max_tokens=10, messages=hi)
    assert overloaded.value.body["error"]["type"] == "overloaded_error"
    with pytest.raises(anthropic.BadRequestError) as invalid:
        aclient.messages.create(
            model="claude-haiku-4-5",
            max_tokens=10,
            messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure: "}],
        )
    assert "trailing whitespace" in invalid.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as orphan:
        aclient.messages.create(
            model="claude-haiku-4-5",
            max_tokens=10,
            messages=[{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "r"}]}],
        )
    assert "toolu_x" in orphan.value.message
    with pytest.raises(anthropic.APIStatusError) as mid_stream:
        with aclient.messages.stream(model="ratelimit-2", max_tokens=10, messages=[{"role": "user", "content": "a b c"}]) as s:
            list(s.text_stream)
    assert mid_stream.value.body["error"]["type"] == "rate_limit_error"


# --------------------------------------------------------------- (b) OpenAI SDK → Tollgate → mock


def test_plain_chat_is_translated_to_messages(client, stack):
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello claude"}],
        temperature=0.2,
        max_tokens=50,
        stop=["END"],
    )
    body = completion.to_dict()
    assert completion.choices[0].message.content == "You said: hello claude"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == MODEL
    assert body["service"]["upstream_model"] == "claude-haiku-4-5"
    assert completion.id.startswith("chatcmpl-msg_mock_")
    assert body["provider"] == "anthropic"
    assert body["usage"]["prompt_tokens"] == 12
    assert body["usage"]["completion_tokens"] == 4
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    # At 1.00 / 5.00 USD per Mtok.
    assert Decimal(str(body["usage"]["cost"])) == Decimal(12 * 1000 + 4 * 5000) / Decimal(10**9)

    sent = last_messages_request(stack)
    assert sent["headers"]["x-api-key"] == "test-key"
    assert sent["headers"]["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent["headers"]
    assert sent["body"] == {
        "model": "claude-haiku-4-5",
        "max_tokens": 50,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello claude"}]}],
        "temperature": 0.2,
        "stop_sequences": ["END"],
    }


def test_image_parts_become_image_blocks(client, stack):
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                ],
            }
        ],
    )
    assert completion.choices[0].message.content == "You said: what is this"
    content = last_messages_request(stack)["body"]["messages"][0]["content"]
    assert content[1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}


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
    sent = last_messages_request(stack)["body"]
    assert sent["stream"] is True
    # Anthropic requires max_tokens: the gateway's output cap is sent.
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
    }
]


def test_tool_call_round_trip(client, stack):
    question = {"role": "user", "content": "weather in Paris?"}
    first = client.chat.completions.create(model=MODEL, messages=[question], tools=TOOLS, tool_choice="required")
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.id.startswith("toolu_mock_")
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "mock"}
    sent = last_messages_request(stack)["body"]
    assert sent["tool_choice"] == {"type": "any"}
    assert sent["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather",
            "input_schema": TOOLS[0]["function"]["parameters"],
            "strict": True,
        }
    ]

    follow_up = client.chat.completions.create(
        model=MODEL,
        tools=TOOLS,
        messages=[question, choice.message.to_dict(), {"role": "tool", "tool_call_id": call.id, "content": "sunny"}],
    )
    assert follow_up.choices[0].message.content == "Tool result: sunny"
    messages = last_messages_request(stack)["body"]["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": call.id, "name": "get_weather", "input": {"city": "mock"}}],
    }
    assert messages[2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}],
    }


def test_streamed_tool_call_deltas(client, stack):
    stream = client.chat.completions.create(
        model=MODEL,
        stream=True,
        messages=[{"role": "user", "content": "look it up"}],
        tools=TOOLS,
        parallel_tool_calls=False,
    )
    calls = []
    finish = None
    for chunk in stream:
        if chunk.choices:
            calls += chunk.choices[0].delta.tool_calls or []
            finish = chunk.choices[0].finish_reason or finish
    assert [c.index for c in calls] == [0] * len(calls)
    assert len(calls) > 2, "arguments should arrive in several fragments"
    assert calls[0].id.startswith("toolu_mock_") and calls[0].function.name == "get_weather"
    assert json.loads("".join(c.function.arguments or "" for c in calls)) == {"city": "mock"}
    assert finish == "tool_calls"
    assert last_messages_request(stack)["body"]["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


def test_json_schema(client, stack):
    completion = client.chat.completions.parse(
        model=MODEL, messages=[{"role": "user", "content": "Ada, 36"}], response_format=Person
    )
    assert completion.choices[0].message.parsed == Person(name="mock", age=1)
    fmt = last_messages_request(stack)["body"]["output_config"]["format"]
    assert fmt == {
        "type": "json_schema",
        "schema": {
            "type": "object",
            "title": "Person",
            "properties": {"name": {"type": "string", "title": "Name"}, "age": {"type": "integer", "title": "Age"}},
            "required": ["name", "age"],
            "additionalProperties": False,
        },
    }


@pytest.mark.parametrize("stream", [False, True])
def test_json_mode_is_a_forced_tool(client, stack, stream):
    response = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "hi"}],
        response_format={"type": "json_object"},
        stream=stream,
    )
    if stream:
        chunks = list(response)
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        assert finish == ["stop"]
    else:
        content = response.choices[0].message.content
        assert response.choices[0].finish_reason == "stop"
        assert response.choices[0].message.tool_calls is None
    # The mock fills the tool's open object schema with an empty object.
    assert json.loads(content) == {}
    sent = last_messages_request(stack)["body"]
    assert sent["tool_choice"] == {"type": "tool", "name": "json_response"}
    assert sent["tools"][0]["input_schema"] == {"type": "object"}


def test_rate_limit_maps_to_upstream_rate_limited(client):
    # A lone candidate's 429 reaches the caller as a 429 (docs/errors.md).
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(model="anthropic/limited", messages=[{"role": "user", "content": "hi"}])
    assert limited.value.status_code == 429
    assert limited.value.code == "upstream_rate_limited"
    assert "rate limit" in limited.value.message


def test_mid_stream_rate_limit_continues_on_the_fallback(client, stack):
    stream = client.chat.completions.create(
        model="anthropic/throttled",
        stream=True,
        messages=[{"role": "user", "content": "one two three four five"}],
        extra_body={"models": [MODEL]},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: one two three four five"
    attempts = chunks[-1].to_dict()["service"]["attempts"]
    assert [a["model"] for a in attempts] == ["ratelimit-2", "claude-haiku-4-5"]
    sent = last_messages_request(stack)["body"]["messages"]
    if sent[-1]["role"] == "assistant":
        # The fallback got the partial answer as an assistant prefill.
        assert sent[-1] == {"role": "assistant", "content": [{"type": "text", "text": "You said:"}]}
    else:
        # Under load the rate-limit frame can arrive with the first chunks,
        # before any content was relayed: the fallback then starts over,
        # invisibly to the caller (the text above is still whole).
        assert sent[-1]["role"] == "user" and "one two three four five" in json.dumps(sent[-1])


def test_what_anthropic_cannot_do_is_refused(client):
    with pytest.raises(openai.BadRequestError) as orphan:
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_9", "content": "x"}],
        )
    assert "call_9" in orphan.value.message
    with pytest.raises(openai.BadRequestError) as choices:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], n=2)
    assert "'n' must be 1" in choices.value.message


def test_context_length_and_overload_are_classified(client):
    # Last in this file: an overload counts against the provider's health.
    with pytest.raises(openai.BadRequestError) as too_long:
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            extra_body={"mock": {"status": 400, "error_code": "context_length_exceeded"}},
        )
    assert too_long.value.code == "context_length_exceeded"
    assert "prompt is too long" in too_long.value.message
    with pytest.raises(openai.InternalServerError) as overloaded:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], extra_body={"mock": {"status": 529}}
        )
    assert overloaded.value.status_code == 502
    assert overloaded.value.code == "upstream_overloaded"
