"""Amazon Bedrock's Converse API, two ways:

(a) the official AWS SDK (boto3's `bedrock-runtime` client) straight at the mock's
    Converse routes, proving the mock is faithful enough for the real SDK;
(b) the official OpenAI SDK through the gateway's `bedrock` adapter to the mock,
    with catalog models such as `bedrock/anthropic.claude-3-5-haiku-20241022-v1:0`
    (a `:` in the id) and the conftest's fault models `bedrock/limited` (fail-429)
    and `bedrock/throttled` (ratelimit-2).
"""

import json
from decimal import Decimal

import boto3
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EventStreamError
from pydantic import BaseModel

HAIKU = "anthropic.claude-3-5-haiku-20241022-v1:0"
MODEL = f"bedrock/{HAIKU}"
NOVA = "bedrock/amazon.nova-lite-v1:0"

WEATHER_SPEC = {
    "toolSpec": {
        "name": "get_weather",
        "inputSchema": {
            "json": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        },
    }
}


def last_bedrock_request(stack):
    return stack.last_upstream_request("/model/")


@pytest.fixture()
def runtime(stack):
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=stack.mock_url,
        region_name="us-east-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="fake-secret-for-tests",
        config=Config(retries={"total_max_attempts": 1}),
    )


# ---------------------------------------------------------------- (a) boto3 → mock


def test_boto3_converse(runtime, stack):
    response = runtime.converse(
        modelId=HAIKU,
        messages=[{"role": "user", "content": [{"text": "hello boto"}]}],
        system=[{"text": "Be brief."}],
        inferenceConfig={"maxTokens": 50, "temperature": 0.5},
    )
    assert response["output"]["message"] == {"role": "assistant", "content": [{"text": "You said: hello boto"}]}
    assert response["stopReason"] == "end_turn"
    # (2 words + 4) for the system prompt and the user message; 4 reply words.
    assert response["usage"] == {"inputTokens": 12, "outputTokens": 4, "totalTokens": 16}
    assert response["ResponseMetadata"]["RequestId"]
    sent = last_bedrock_request(stack)
    assert sent["path"] == "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
    assert sent["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")


def test_boto3_converse_stream(runtime):
    response = runtime.converse_stream(
        modelId="amazon.nova-pro-v1:0", messages=[{"role": "user", "content": [{"text": "one two three"}]}]
    )
    events = list(response["stream"])
    kinds = [next(iter(e)) for e in events]
    assert kinds[0] == "messageStart" and kinds[-2:] == ["messageStop", "metadata"]
    text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e)
    assert text == "You said: one two three"
    assert events[-2]["messageStop"]["stopReason"] == "end_turn"
    assert events[-1]["metadata"]["usage"] == {"inputTokens": 7, "outputTokens": 5, "totalTokens": 12}


def test_boto3_tool_use_round_trip(runtime):
    messages = [{"role": "user", "content": [{"text": "weather in Paris?"}]}]
    first = runtime.converse(modelId=HAIKU, messages=messages, toolConfig={"tools": [WEATHER_SPEC]})
    assert first["stopReason"] == "tool_use"
    tool_use = first["output"]["message"]["content"][0]["toolUse"]
    assert tool_use["name"] == "get_weather" and tool_use["input"] == {"city": "mock"}

    streamed = runtime.converse_stream(modelId=HAIKU, messages=messages, toolConfig={"tools": [WEATHER_SPEC]})
    events = list(streamed["stream"])
    start = next(e["contentBlockStart"] for e in events if "contentBlockStart" in e)
    assert start["start"]["toolUse"]["name"] == "get_weather"
    fragments = [e["contentBlockDelta"]["delta"]["toolUse"]["input"] for e in events if "contentBlockDelta" in e]
    assert json.loads("".join(fragments)) == {"city": "mock"}

    messages += [
        first["output"]["message"],
        {"role": "user", "content": [{"toolResult": {"toolUseId": tool_use["toolUseId"], "content": [{"text": "sunny"}]}}]},
    ]
    second = runtime.converse(modelId=HAIKU, messages=messages, toolConfig={"tools": [WEATHER_SPEC]})
    assert second["output"]["message"]["content"] == [{"text": "Tool result: sunny"}]


def test_boto3_raises_typed_errors(runtime):
    hi = [{"role": "user", "content": [{"text": "hi"}]}]
    with pytest.raises(runtime.exceptions.ThrottlingException) as throttled:
        runtime.converse(modelId="fail-429", messages=hi)
    assert throttled.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429
    assert "Too many requests" in throttled.value.response["Error"]["Message"]
    with pytest.raises(runtime.exceptions.ServiceUnavailableException):
        runtime.converse(modelId="fail-503", messages=hi)
    with pytest.raises(runtime.exceptions.ValidationException) as invalid:
        runtime.converse(modelId=HAIKU, messages=hi + hi)
    assert "alternate between user and assistant" in str(invalid.value)
    # Mid-stream: the exception frame surfaces while iterating.
    stream = runtime.converse_stream(modelId="ratelimit-2", messages=[{"role": "user", "content": [{"text": "a b c"}]}])
    with pytest.raises(EventStreamError) as mid_stream:
        list(stream["stream"])
    assert isinstance(mid_stream.value, ClientError)
    assert mid_stream.value.response["Error"]["Code"] == "throttlingException"


# ---------------------------------------------------------------- (b) OpenAI SDK → gateway → mock


def test_plain_chat_is_signed_and_translated(client, stack):
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello bedrock"}],
        temperature=0.3,
    )
    body = completion.to_dict()
    assert completion.choices[0].message.content == "You said: hello bedrock"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == MODEL
    assert body["service"]["upstream_model"] == HAIKU
    assert body["provider"] == "bedrock"
    assert body["usage"]["prompt_tokens"] == 12 and body["usage"]["completion_tokens"] == 4
    # 12 prompt and 4 completion tokens at 0.80 / 4.00 USD per Mtok.
    assert Decimal(str(body["usage"]["cost"])) == Decimal(12 * 800 + 4 * 4000) / Decimal(10**9)

    sent = last_bedrock_request(stack)
    assert sent["path"] == "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
    assert sent["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "x-amz-date" in sent["headers"]
    assert "fake-secret-for-tests" not in json.dumps(sent)
    assert sent["body"]["messages"] == [{"role": "user", "content": [{"text": "hello bedrock"}]}]
    assert sent["body"]["system"] == [{"text": "Be brief."}]
    assert sent["body"]["inferenceConfig"]["temperature"] == 0.3
    assert sent["body"]["inferenceConfig"]["maxTokens"] >= 1
    assert "model" not in sent["body"]


def test_streaming(client, stack):
    stream = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "one two three"}], stream=True
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: one two three"
    final = chunks[-1].to_dict()
    assert final["choices"][0]["finish_reason"] == "stop"
    assert final["usage"]["completion_tokens"] == 5
    assert final["service"]["request_id"].startswith("req_")
    assert last_bedrock_request(stack)["path"].endswith("%3A0/converse-stream")


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def test_tool_call_round_trip(client, stack):
    first = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "weather in Paris?"}], tools=TOOLS, tool_choice="auto"
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "mock"}
    assert last_bedrock_request(stack)["body"]["toolConfig"]["toolChoice"] == {"auto": {}}

    follow_up = client.chat.completions.create(
        model=MODEL,
        tools=TOOLS,
        messages=[
            {"role": "user", "content": "weather in Paris?"},
            choice.message.to_dict(),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ],
    )
    assert follow_up.choices[0].message.content == "Tool result: sunny"
    sent = last_bedrock_request(stack)["body"]["messages"]
    assert sent[1]["content"] == [{"toolUse": {"toolUseId": call.id, "name": "get_weather", "input": {"city": "mock"}}}]
    assert sent[2]["content"] == [{"toolResult": {"toolUseId": call.id, "content": [{"text": "sunny"}]}}]


def test_streamed_tool_call_deltas(client):
    stream = client.chat.completions.create(
        model=NOVA,
        stream=True,
        messages=[{"role": "user", "content": "look it up"}],
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    arguments, names, finish = "", [], None
    for chunk in stream:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            arguments += call.function.arguments or ""
            if call.function.name:
                names.append(call.function.name)
        if chunk.choices and chunk.choices[0].finish_reason:
            finish = chunk.choices[0].finish_reason
    assert names == ["get_weather"]
    assert json.loads(arguments) == {"city": "mock"}
    assert finish == "tool_calls"


class Person(BaseModel):
    name: str
    age: int


def test_json_schema_through_a_forced_tool(client, stack):
    completion = client.chat.completions.parse(
        model=MODEL, messages=[{"role": "user", "content": "Ada, 36"}], response_format=Person
    )
    assert completion.choices[0].finish_reason == "stop"
    assert completion.choices[0].message.parsed == Person(name="mock", age=1)
    assert Person.model_validate_json(completion.choices[0].message.content) == Person(name="mock", age=1)
    config = last_bedrock_request(stack)["body"]["toolConfig"]
    assert config["toolChoice"] == {"tool": {"name": "json_response"}}
    assert config["tools"][0]["toolSpec"]["inputSchema"]["json"]["required"] == ["name", "age"]


def test_rate_limit_maps_to_upstream_rate_limited(client):
    # A lone candidate's 429 reaches the caller as a 429 (docs/errors.md).
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(model="bedrock/limited", messages=[{"role": "user", "content": "hi"}])
    assert limited.value.status_code == 429
    assert limited.value.code == "upstream_rate_limited"
    assert "ThrottlingException" in limited.value.message


def test_remote_image_urls_are_refused(client):
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model=MODEL,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what is this?"},
                        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                    ],
                }
            ],
        )
    assert "base64 data URL" in refused.value.message


def test_mid_stream_throttling_continues_on_the_fallback(client, stack):
    stream = client.chat.completions.create(
        model="bedrock/throttled",
        stream=True,
        messages=[{"role": "user", "content": "one two three four five"}],
        extra_body={"models": [NOVA]},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: one two three four five"
    attempts = chunks[-1].to_dict()["service"]["attempts"]
    assert [a["model"] for a in attempts] == ["ratelimit-2", "amazon.nova-lite-v1:0"]
    sent = last_bedrock_request(stack)["body"]["messages"]
    if sent[-1]["role"] == "assistant":
        # The fallback got the partial answer as an assistant prefill.
        assert sent[-1] == {"role": "assistant", "content": [{"text": "You said:"}]}
    else:
        # Under load the rate-limit frame can arrive with the first chunks,
        # before any content was relayed: the fallback then starts over,
        # invisibly to the caller (the text above is still whole).
        assert sent[-1]["role"] == "user" and "one two three four five" in json.dumps(sent[-1])


def test_catalog_models_with_colons_are_listed_and_retrievable(client):
    listed = {m.id: m.to_dict() for m in client.models.list()}
    haiku = listed[MODEL]
    assert haiku["owned_by"] == "bedrock"
    assert haiku["service"]["available"] is True
    assert client.models.retrieve(MODEL).id == MODEL
