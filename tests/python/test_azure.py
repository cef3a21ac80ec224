"""The official OpenAI SDK through Tollgate's azure-openai adapter to the mock's
Azure deployment route (`/openai/deployments/{deployment}/chat/completions`)."""

import json
from decimal import Decimal

from pydantic import BaseModel

MODEL = "azure-openai/gpt-4o-mini"  # a built-in deployment name; the conftest points the provider at the mock


def last_azure_request(stack):
    return stack.last_upstream_request("/openai/deployments/")


def test_plain_chat_reaches_the_deployment_with_api_version_and_api_key(client, stack):
    completion = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hello azure"}])
    body = completion.to_dict()
    assert completion.choices[0].message.content == "You said: hello azure"
    assert body["provider"] == "azure-openai"
    # 2 words + 4 = 6 prompt tokens, 4 completion tokens at 0.15 / 0.60 USD per Mtok.
    assert Decimal(str(body["usage"]["cost"])) == Decimal(6 * 150 + 4 * 600) / Decimal(10**9)

    sent = last_azure_request(stack)
    assert sent["path"] == "/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21"
    assert sent["headers"]["api-key"] == "test-key"
    assert "authorization" not in sent["headers"]
    assert "model" not in sent["body"]
    assert sent["body"]["messages"] == [{"role": "user", "content": "hello azure"}]


def test_streaming(client, stack):
    stream = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "one two three"}], stream=True
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: one two three"
    final = chunks[-1].to_dict()
    assert final["usage"]["completion_tokens"] == 5
    assert final["service"]["request_id"].startswith("req_")
    sent = last_azure_request(stack)
    assert sent["body"]["stream"] is True
    assert sent["body"]["stream_options"] == {"include_usage": True}


def test_tool_call_round_trip(client):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]
    first = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "weather in Paris?"}], tools=tools
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "mock"}

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


def test_streamed_tool_call_deltas(client):
    stream = client.chat.completions.create(
        model=MODEL,
        stream=True,
        messages=[{"role": "user", "content": "look it up"}],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
                },
            }
        ],
    )
    arguments = ""
    for chunk in stream:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            arguments += call.function.arguments or ""
    assert json.loads(arguments) == {"q": "mock"}


class Person(BaseModel):
    name: str
    age: int


def test_json_schema(client, stack):
    completion = client.chat.completions.parse(
        model=MODEL, messages=[{"role": "user", "content": "Ada, 36"}], response_format=Person
    )
    parsed = completion.choices[0].message.parsed
    assert parsed == Person(name="mock", age=1)
    sent = last_azure_request(stack)
    assert sent["body"]["response_format"]["type"] == "json_schema"
    assert sent["body"]["response_format"]["json_schema"]["name"] == "Person"
