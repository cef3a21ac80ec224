"""The official OpenAI Python SDK against Tollgate, changing only base_url and api_key."""

import json
from decimal import Decimal

import openai
import pytest
from pydantic import BaseModel

MODEL = "acme/small"


def test_non_streaming_answer_carries_provider_cost_and_request_id(client):
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "hello there"}]
    )
    completion = raw.parse()
    body = completion.to_dict()
    assert completion.choices[0].message.content == "You said: hello there"
    assert body["provider"] == "acme"
    # prompt = 2 words + 4 = 6 tokens, completion = 4 tokens:
    # 6 × 0.50 + 4 × 1.50 USD per million = 0.000009 USD exactly.
    assert completion.usage.prompt_tokens == 6
    assert completion.usage.completion_tokens == 4
    assert Decimal(str(body["usage"]["cost"])) == Decimal("0.000009")
    request_id = body["service"]["request_id"]
    assert request_id.startswith("req_")
    assert raw.headers["x-request-id"] == request_id


def test_streaming_text_and_final_usage(client):
    stream = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "one two three"}], stream=True
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: one two three"
    assert all(c.to_dict()["provider"] == "acme" for c in chunks)
    final = chunks[-1].to_dict()
    assert final["usage"]["completion_tokens"] == 5
    assert Decimal(str(final["usage"]["cost"])) == Decimal(7 * 500 + 5 * 1500) / Decimal(10**9)
    assert final["service"]["request_id"].startswith("req_")


def test_tool_calls(client):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                    "required": ["city", "days"],
                },
            },
        }
    ]
    completion = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "weather in Paris?"}], tools=tools
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "mock", "days": 1}

    # Round trip: send the tool result back; the model answers in text.
    follow_up = client.chat.completions.create(
        model=MODEL,
        tools=tools,
        messages=[
            {"role": "user", "content": "weather in Paris?"},
            choice.message.to_dict(),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ],
    )
    assert follow_up.choices[0].message.content == "Tool result: sunny"


def test_streamed_tool_call_deltas_assemble(client):
    stream = client.chat.completions.create(
        model=MODEL,
        stream=True,
        messages=[{"role": "user", "content": "look it up"}],
        tools=[{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}],
    )
    arguments = ""
    name = None
    for chunk in stream:
        for delta_call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            name = name or delta_call.function.name
            arguments += delta_call.function.arguments or ""
    assert name == "lookup"
    assert json.loads(arguments) == {"q": "mock"}


class Rating(BaseModel):
    answer: str
    score: int
    tags: list[str]


def test_json_schema_structured_output(client):
    completion = client.chat.completions.parse(
        model=MODEL, messages=[{"role": "user", "content": "rate this"}], response_format=Rating
    )
    parsed = completion.choices[0].message.parsed
    assert isinstance(parsed, Rating)
    assert parsed.score == 1 and parsed.tags == ["mock"]


def test_json_mode(client):
    completion = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "as json"}], response_format={"type": "json_object"}
    )
    assert json.loads(completion.choices[0].message.content) == {"reply": "You said: as json"}


def test_models_list(client):
    models = {m.id: m for m in client.models.list()}
    small = models["acme/small"].to_dict()
    assert small["owned_by"] == "acme"
    assert small["service"]["available"] is True
    assert small["pricing"]["prompt"] == "0.000000500000"


def test_error_mapping(client, stack):
    from openai import OpenAI

    bad = OpenAI(base_url=f"{stack.url}/v1", api_key="tg_live_" + "x" * 40, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.NotFoundError) as not_found:
        client.chat.completions.create(model="acme/nope", messages=[{"role": "user", "content": "hi"}])
    assert not_found.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=[])
    with pytest.raises(openai.InternalServerError) as upstream:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], extra_body={"mock": {"status": 500}}
        )
    assert upstream.value.status_code == 502
    # Still serving.
    assert client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "ok"}]).choices
