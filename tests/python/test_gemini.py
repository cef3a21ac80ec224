"""Gemini, two ways.

(a) The official google-genai SDK pointed straight at the mock's Gemini routes
    (`/v1beta/models/{model}:generateContent` / `:streamGenerateContent?alt=sse`),
    proving the mock speaks the protocol well enough for the real client.
(b) The official OpenAI SDK through Tollgate's `gemini` adapter to the same routes,
    with `gemini/<model>` from the built-in catalog (the conftest points the
    provider at the mock and adds the fault models `gemini/limited` (fail-429)
    and `gemini/throttled` (ratelimit-2)).
"""

import json
from decimal import Decimal

import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from pydantic import BaseModel

MODEL = "gemini/gemini-2.5-flash"


class Person(BaseModel):
    name: str
    age: int


def last_gemini_request(stack):
    return stack.last_upstream_request("/v1beta/models/")


def make_sdk(stack, api_version="v1beta"):
    return genai.Client(
        api_key="test-key",
        http_options=types.HttpOptions(base_url=stack.mock_url, api_version=api_version),
    )


@pytest.fixture()
def gclient(stack):
    # Held by the fixture: a Client closes its HTTP pool when garbage collected.
    client = make_sdk(stack)
    yield client
    client.close()


WEATHER = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="get_weather",
            description="Current weather for a city",
            parameters=types.Schema(
                type=types.Type.OBJECT,
                properties={"city": types.Schema(type=types.Type.STRING)},
                required=["city"],
            ),
        )
    ]
)


# --------------------------------------------------------------- (a) google-genai → mock


def test_sdk_generate_content(gclient, stack):
    response = gclient.models.generate_content(
        model="gemini-2.5-flash",
        contents="hello gemini",
        config=types.GenerateContentConfig(system_instruction="Be brief.", temperature=0.3, max_output_tokens=50),
    )
    assert response.text == "You said: hello gemini"
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    assert response.model_version == "gemini-2.5-flash"
    assert response.response_id.startswith("mock-gemini-")
    # system (2 words + 4) + user (2 words + 4); 4 words answered.
    assert response.usage_metadata.prompt_token_count == 12
    assert response.usage_metadata.candidates_token_count == 4
    assert response.usage_metadata.total_token_count == 16
    sent = last_gemini_request(stack)
    assert sent["path"] == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert sent["headers"]["x-goog-api-key"] == "test-key"


def test_sdk_default_api_version_is_served_too(stack):
    # This SDK defaults to the v1 API; the mock serves both versions.
    client = make_sdk(stack, api_version=None)
    response = client.models.generate_content(model="gemini-2.0-flash", contents="hi")
    client.close()
    assert response.text == "You said: hi"


def test_sdk_stream(gclient, stack):
    chunks = list(gclient.models.generate_content_stream(model="gemini-2.5-flash", contents="one two three"))
    assert "".join(c.text or "" for c in chunks) == "You said: one two three"
    assert len(chunks) == 5
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert chunks[-1].usage_metadata.candidates_token_count == 5
    assert last_gemini_request(stack)["path"].endswith(":streamGenerateContent?alt=sse")


def test_sdk_function_call_and_response(gclient):
    client = gclient
    config = types.GenerateContentConfig(
        tools=[WEATHER],
        tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(mode="ANY")),
    )
    question = types.Content(role="user", parts=[types.Part.from_text(text="weather in Paris?")])
    first = client.models.generate_content(model="gemini-2.5-flash", contents=[question], config=config)
    call = first.function_calls[0]
    assert call.name == "get_weather"
    assert call.args == {"city": "mock"}

    follow_up = client.models.generate_content(
        model="gemini-2.5-flash",
        contents=[
            question,
            first.candidates[0].content,
            types.Content(
                role="user",
                parts=[types.Part.from_function_response(name="get_weather", response={"output": "sunny"})],
            ),
        ],
        config=types.GenerateContentConfig(tools=[WEATHER]),
    )
    assert follow_up.text == "Tool result: sunny"


def test_sdk_structured_output(gclient):
    response = gclient.models.generate_content(
        model="gemini-2.5-flash",
        contents="Ada, 36",
        config=types.GenerateContentConfig(response_mime_type="application/json", response_schema=Person),
    )
    assert response.parsed == Person(name="mock", age=1)


def test_sdk_raises_typed_errors(gclient):
    client = gclient
    with pytest.raises(genai_errors.ClientError) as limited:
        client.models.generate_content(model="fail-429", contents="hi")
    assert limited.value.code == 429
    assert limited.value.status == "RESOURCE_EXHAUSTED"
    with pytest.raises(genai_errors.ServerError) as overloaded:
        client.models.generate_content(model="fail-503", contents="hi")
    assert overloaded.value.code == 503
    assert overloaded.value.status == "UNAVAILABLE"
    with pytest.raises(genai_errors.ClientError) as mid_stream:
        list(client.models.generate_content_stream(model="ratelimit-2", contents="a b c"))
    assert mid_stream.value.code == 429
    with pytest.raises(genai_errors.ClientError) as invalid:
        # Gemini's Schema has no additionalProperties: the mock refuses it as Gemini does.
        client.models.generate_content(
            model="gemini-2.5-flash",
            contents="hi",
            config=types.GenerateContentConfig(tools=[{"function_declarations": [{
                "name": "f",
                "parameters": {"type": "OBJECT", "properties": {"a": {"type": "STRING"}}, "additionalProperties": False},
            }]}]),
        )
    assert invalid.value.code == 400
    assert invalid.value.status == "INVALID_ARGUMENT"


# --------------------------------------------------------------- (b) OpenAI SDK → Tollgate → mock


def test_plain_chat_is_translated_to_generate_content(client, stack):
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello gemini"}],
        temperature=0.2,
        max_tokens=50,
        stop=["END"],
    )
    body = completion.to_dict()
    assert completion.choices[0].message.content == "You said: hello gemini"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == MODEL
    assert body["service"]["upstream_model"] == "gemini-2.5-flash"
    assert completion.id.startswith("chatcmpl-mock-gemini-")
    assert body["provider"] == "gemini"
    assert body["usage"]["prompt_tokens"] == 12
    assert body["usage"]["completion_tokens"] == 4
    # At 0.30 / 2.50 USD per Mtok.
    assert Decimal(str(body["usage"]["cost"])) == Decimal(12 * 300 + 4 * 2500) / Decimal(10**9)

    sent = last_gemini_request(stack)
    assert sent["path"] == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert sent["headers"]["x-goog-api-key"] == "test-key"
    assert "authorization" not in sent["headers"]
    assert sent["body"] == {
        "contents": [{"role": "user", "parts": [{"text": "hello gemini"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {"temperature": 0.2, "maxOutputTokens": 50, "stopSequences": ["END"]},
    }


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
    sent = last_gemini_request(stack)
    assert sent["path"] == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    # The gateway's output cap is sent when the caller gives none.
    assert sent["body"]["generationConfig"]["maxOutputTokens"] > 0


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
    assert call.id == "call_0"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "mock"}
    declaration = last_gemini_request(stack)["body"]["tools"][0]["functionDeclarations"][0]
    # Gemini rejects JSON-Schema-only keywords: the adapter strips them.
    assert declaration == {
        "name": "get_weather",
        "description": "Current weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }

    follow_up = client.chat.completions.create(
        model=MODEL,
        tools=TOOLS,
        messages=[question, choice.message.to_dict(), {"role": "tool", "tool_call_id": call.id, "content": "sunny"}],
    )
    assert follow_up.choices[0].message.content == "Tool result: sunny"
    contents = last_gemini_request(stack)["body"]["contents"]
    assert contents[1] == {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "mock"}}}]}
    assert contents[2] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "sunny"}}}],
    }


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
    assert [(c.index, c.id, c.function.name) for c in calls] == [(0, "call_0", "get_weather")]
    assert json.loads("".join(c.function.arguments for c in calls)) == {"city": "mock"}
    assert finish == "tool_calls"


def test_json_schema(client, stack):
    completion = client.chat.completions.parse(
        model=MODEL, messages=[{"role": "user", "content": "Ada, 36"}], response_format=Person
    )
    assert completion.choices[0].message.parsed == Person(name="mock", age=1)
    config = last_gemini_request(stack)["body"]["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseSchema"] == {
        "type": "object",
        "title": "Person",
        "properties": {"name": {"type": "string", "title": "Name"}, "age": {"type": "integer", "title": "Age"}},
        "required": ["name", "age"],
    }


def test_json_mode(client):
    completion = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], response_format={"type": "json_object"}
    )
    assert json.loads(completion.choices[0].message.content) == {"reply": "You said: hi"}


def test_rate_limit_maps_to_upstream_rate_limited(client):
    # A lone candidate's 429 reaches the caller as a 429 (docs/errors.md).
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(model="gemini/limited", messages=[{"role": "user", "content": "hi"}])
    assert limited.value.status_code == 429
    assert limited.value.code == "upstream_rate_limited"
    assert "Resource has been exhausted" in limited.value.message


def test_mid_stream_rate_limit_continues_on_the_fallback(client, stack):
    stream = client.chat.completions.create(
        model="gemini/throttled",
        stream=True,
        messages=[{"role": "user", "content": "one two three four five"}],
        extra_body={"models": [MODEL]},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: one two three four five"
    attempts = chunks[-1].to_dict()["service"]["attempts"]
    assert [a["model"] for a in attempts] == ["ratelimit-2", "gemini-2.5-flash"]
    # The fallback got the partial answer as a trailing model turn (prefill).
    sent = last_gemini_request(stack)["body"]["contents"]
    assert sent[-1] == {"role": "model", "parts": [{"text": "You said:"}]}


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
