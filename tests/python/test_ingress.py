"""Other client protocols on the chat pipeline (docs/ingress.md).

(a) The official anthropic SDK pointed at Tollgate's `POST /v1/messages` with a
    Tollgate key, against an OpenAI-compatible provider (`acme/small`) and the
    Anthropic adapter (`anthropic/claude-haiku-4-5`), both on the mock upstream.
(b) The official openai SDK's `client.responses.create` against `POST /v1/responses`.
(c) Per-kind prices: cached prompt tokens billed at the cache-read price; the
    sourced price table and `tollgate catalog import-prices`; `created` on
    streamed chunks.
"""

import json
import subprocess
import urllib.request
from decimal import ROUND_CEILING, Decimal
from pathlib import Path

import anthropic
import httpx
import pytest

from conftest import BIN, Stack, free_port, wait_healthy

MODELS = ["acme/small", "anthropic/claude-haiku-4-5"]
WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
NANO = Decimal(10) ** -9


def posted(stack: Stack) -> Decimal:
    """The workspace wallet's posted balance."""
    config = Path(stack.dir.name) / "tollgate.toml"
    out = subprocess.run(
        [BIN, "admin", "wallet", "--config", str(config), "--workspace", stack.workspace_id, "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Decimal(json.loads(out.stdout)["posted_usd"])


def pricing(stack: Stack, model: str) -> dict:
    request = urllib.request.Request(f"{stack.url}/v1/models/{model}", headers={"authorization": f"Bearer {stack.api_key}"})
    with urllib.request.urlopen(request) as r:
        return json.load(r)["pricing"]


def expected_cost(price: dict, **tokens: int) -> Decimal:
    """Σ tokens × USD per Mtok, rounded up to whole nano-USD (the gateway's rule)."""
    pico = sum(Decimal(price[f"{kind}_per_mtok"]) * count for kind, count in tokens.items()) / Decimal(10**6)
    return pico.quantize(NANO, rounding=ROUND_CEILING)


@pytest.fixture()
def claude(stack):
    client = anthropic.Anthropic(api_key=stack.api_key, base_url=stack.url, max_retries=0)
    yield client
    client.close()


# --------------------------------------------------------------- (a) /v1/messages


@pytest.mark.parametrize("model", MODELS)
def test_messages_create_carries_provider_cost_and_request_id(claude, stack, model):
    before = posted(stack)
    raw = claude.messages.with_raw_response.create(
        model=model, max_tokens=50, system="Be brief.", messages=[{"role": "user", "content": "hello claude"}]
    )
    message = raw.parse()
    assert message.type == "message"
    assert message.content[0].type == "text"
    assert message.content[0].text == "You said: hello claude"
    assert message.stop_reason == "end_turn"
    assert message.id.startswith("msg_")
    # system (2 words + 4) + user (2 words + 4); 4 words answered.
    assert (message.usage.input_tokens, message.usage.output_tokens) == (12, 4)
    body = message.to_dict()
    assert body["provider"] == model.split("/")[0]
    cost = Decimal(body["service"]["cost_usd"])
    assert Decimal(str(body["usage"]["cost"])) == cost
    assert cost == expected_cost(pricing(stack, model), input=12, output=4)
    assert raw.headers["x-request-id"] == body["service"]["request_id"]
    assert before - posted(stack) == cost, "the wallet is debited exactly the cost shown"


def test_messages_accepts_the_key_in_x_api_key(stack):
    answer = httpx.post(
        f"{stack.url}/v1/messages",
        headers={"x-api-key": stack.api_key, "anthropic-version": "2023-06-01"},
        json={"model": "acme/small", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["content"][0]["text"] == "You said: hi"


@pytest.mark.parametrize("model", MODELS)
def test_messages_stream_text(claude, stack, model):
    before = posted(stack)
    with claude.messages.stream(
        model=model, max_tokens=50, messages=[{"role": "user", "content": "one two three"}]
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta")
    assert text == "You said: one two three"
    assert final.content[0].text == text
    assert final.stop_reason == "end_turn"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (7, 5)
    delta = next(e for e in events if e.type == "message_delta").to_dict()
    assert delta["provider"] == model.split("/")[0]
    cost = Decimal(delta["service"]["cost_usd"])
    assert Decimal(str(delta["usage"]["cost"])) == cost
    assert cost == expected_cost(pricing(stack, model), input=7, output=5)
    assert delta["service"]["request_id"].startswith("req_")
    assert before - posted(stack) == cost


@pytest.mark.parametrize("model", MODELS)
def test_messages_tool_use_streamed_then_a_tool_result_turn(claude, stack, model):
    question = {"role": "user", "content": "weather in Paris?"}
    with claude.messages.stream(
        model=model, max_tokens=100, tools=[WEATHER], tool_choice={"type": "any"}, messages=[question]
    ) as stream:
        first = stream.get_final_message()
    assert first.stop_reason == "tool_use"
    call = first.content[-1]
    assert call.type == "tool_use"
    assert (call.name, call.input) == ("get_weather", {"city": "mock"})
    assert call.id

    before = posted(stack)
    follow_up = claude.messages.create(
        model=model,
        max_tokens=100,
        tools=[WEATHER],
        messages=[
            question,
            {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]},
        ],
    )
    assert follow_up.content[0].text == "Tool result: sunny"
    assert follow_up.stop_reason == "end_turn"
    assert before - posted(stack) == Decimal(follow_up.to_dict()["service"]["cost_usd"])


def test_messages_whole_tool_use(claude):
    message = claude.messages.create(
        model="acme/small", max_tokens=100, tools=[WEATHER], messages=[{"role": "user", "content": "look"}]
    )
    assert message.stop_reason == "tool_use"
    assert message.content[0].input == {"city": "mock"}


def test_messages_typed_errors(claude, stack):
    hi = [{"role": "user", "content": "hi"}]
    # Every candidate rate-limited: Anthropic's 429, for a whole answer and a stream.
    with pytest.raises(anthropic.RateLimitError) as limited:
        claude.messages.create(model="primary/limited", max_tokens=10, messages=hi, extra_body={"models": ["anthropic/limited"]})
    error = limited.value.body
    assert error["type"] == "error" and error["error"]["type"] == "rate_limit_error"
    assert [a["provider"] for a in error["service"]["attempts"]] == ["primary", "anthropic"]
    with pytest.raises(anthropic.RateLimitError):
        with claude.messages.stream(model="anthropic/limited", max_tokens=10, messages=hi) as stream:
            list(stream)
    with pytest.raises(anthropic.NotFoundError) as missing:
        claude.messages.create(model="nobody/nothing", max_tokens=10, messages=hi)
    assert missing.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.BadRequestError) as invalid:
        claude.messages.create(model="acme/small", max_tokens=10, messages=[])
    assert "messages" in invalid.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError):
        claude.messages.create(
            model="acme/small",
            max_tokens=10,
            messages=hi,
            tools=[{"type": "web_search_20250305", "name": "web_search"}],
        )
    with pytest.raises(anthropic.AuthenticationError) as unauthorized:
        anthropic.Anthropic(api_key="tg_live_wrong", base_url=stack.url, max_retries=0).messages.create(
            model="acme/small", max_tokens=10, messages=hi
        )
    assert unauthorized.value.body["error"]["type"] == "authentication_error"
    # A stream cut by a rate limit after content ends in Anthropic's error event.
    with pytest.raises(anthropic.APIStatusError) as mid_stream:
        with claude.messages.stream(model="anthropic/throttled", max_tokens=10, messages=[{"role": "user", "content": "a b c"}]) as s:
            list(s)
    assert mid_stream.value.body["error"]["type"] == "rate_limit_error"


def test_messages_to_the_anthropic_adapter_pass_through_natively(claude, stack):
    """cache_control, thinking and documents reach Anthropic untranslated, and
    the thinking block comes back, whole and streamed, billed exactly."""
    model = "anthropic/claude-haiku-4-5"
    price = pricing(stack, model)
    system = [{"type": "text", "text": "You read contracts with great care.", "cache_control": {"type": "ephemeral"}}]
    document = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "The lease runs for twelve months."},
        "title": "Lease",
    }
    question = {"type": "text", "text": "How long is the lease?", "cache_control": {"type": "ephemeral"}}
    asked = dict(
        model=model,
        max_tokens=2048,
        thinking={"type": "enabled", "budget_tokens": 1024},
        system=system,
        messages=[{"role": "user", "content": [document, question]}],
        extra_body={"mock": {"cached_tokens": 6, "cache_write_tokens": 2}},
    )
    before = posted(stack)
    raw = claude.messages.with_raw_response.create(**asked)
    message = raw.parse()
    sent = stack.last_upstream_request("/v1/messages")["body"]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert sent["system"] == system
    assert sent["messages"][0]["content"] == [document, question]
    assert sent["model"] == "claude-haiku-4-5"
    thinking = message.content[0]
    assert thinking.type == "thinking"
    assert thinking.thinking and thinking.signature
    assert message.content[1].type == "text"
    usage = message.usage
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (6, 2)
    body = message.to_dict()
    assert body["provider"] == "anthropic"
    assert raw.headers["x-request-id"] == body["service"]["request_id"]
    cost = Decimal(body["service"]["cost_usd"])
    assert Decimal(str(body["usage"]["cost"])) == cost
    assert cost == expected_cost(
        price, input=usage.input_tokens, cache_read=6, cache_write=2, output=usage.output_tokens
    )
    assert before - posted(stack) == cost

    # An earlier turn's signed thinking block goes back as it came.
    before = posted(stack)
    follow = dict(asked)
    follow["messages"] = asked["messages"] + [
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in message.content]},
        {"role": "user", "content": "And the rent?"},
    ]
    with claude.messages.stream(**follow) as stream:
        events = list(stream)
        final = stream.get_final_message()
    sent = stack.last_upstream_request("/v1/messages")["body"]
    assert sent["messages"][1]["content"][0] == thinking.model_dump(exclude_none=True)
    deltas = {e.delta.type for e in events if e.type == "content_block_delta"}
    assert {"thinking_delta", "signature_delta", "text_delta"} <= deltas
    assert final.content[0].type == "thinking" and final.content[0].signature
    delta = next(e for e in events if e.type == "message_delta").to_dict()
    assert delta["provider"] == "anthropic"
    cost = Decimal(delta["service"]["cost_usd"])
    assert Decimal(str(delta["usage"]["cost"])) == cost
    assert cost == expected_cost(
        price,
        input=final.usage.input_tokens,
        cache_read=6,
        cache_write=2,
        output=final.usage.output_tokens,
    )
    assert before - posted(stack) == cost


def test_count_tokens_asks_anthropic_and_estimates_elsewhere(claude, stack):
    """`messages.count_tokens` of the anthropic SDK: the provider's own count
    where the adapter takes Messages natively (it equals the answer's
    `input_tokens`), a documented estimate elsewhere."""
    asked = dict(system="Be brief.", messages=[{"role": "user", "content": "hello claude"}])
    native = claude.messages.count_tokens(
        model="anthropic/claude-haiku-4-5", extra_headers={"anthropic-beta": "token-counting-2024-11-01"}, **asked
    )
    sent = stack.last_upstream_request("/v1/messages/count_tokens")
    assert "max_tokens" not in sent["body"] and sent["body"]["model"] == "claude-haiku-4-5"
    assert sent["headers"]["anthropic-beta"] == "token-counting-2024-11-01"
    answered = claude.messages.create(model="anthropic/claude-haiku-4-5", max_tokens=20, **asked)
    assert native.input_tokens == answered.usage.input_tokens == 12
    assert native.to_dict()["service"]["counted_by"] == "provider"
    estimate = claude.messages.count_tokens(model="acme/small", **asked)
    assert estimate.input_tokens > 0 and estimate.to_dict()["service"]["counted_by"] == "estimate"
    with pytest.raises(anthropic.NotFoundError):
        claude.messages.count_tokens(model="nobody/nothing", **asked)


@pytest.mark.parametrize("model", MODELS)
def test_system_messages_within_the_conversation(claude, stack, model):
    """Claude Code's mid-conversation system message (issue 34): a system turn
    in place on the translated path, folded into `system` natively, with the
    `anthropic-beta` header forwarded to Anthropic."""
    beta = "mid-conversation-system-2026-04-07"
    message = claude.messages.create(
        model=model,
        max_tokens=50,
        system="Be brief.",
        messages=[
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "hi"},
            {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "again"},
        ],
        extra_headers={"anthropic-beta": beta},
    )
    assert message.content[0].text == "You said: again"
    assert message.model == model
    if model.startswith("anthropic/"):
        sent = stack.last_upstream_request("/v1/messages")
        assert [m["role"] for m in sent["body"]["messages"]] == ["user", "assistant", "user"]
        assert sent["body"]["system"] == [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Answer in one word."}]
        assert sent["headers"]["anthropic-beta"] == beta
    else:
        sent = stack.last_upstream_request("/v1/chat/completions")["body"]
        assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "system", "user"]


def test_an_unknown_model_is_404_before_the_body_is_checked(claude):
    with pytest.raises(anthropic.NotFoundError) as unknown:
        claude.messages.create(
            model="claude-opus-4-8", max_tokens=10, messages=[{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]
        )
    assert unknown.value.body["error"]["code"] == "model_not_found"


@pytest.mark.parametrize("model", MODELS)
def test_every_answer_names_the_model_asked_for(claude, client, model):
    """`model` is the id asked for (`provider/model`) on every protocol, whole
    and streamed; the upstream's own name is `service.upstream_model`."""
    message = claude.messages.create(model=model, max_tokens=20, messages=[{"role": "user", "content": "hi"}])
    assert message.model == model
    assert message.to_dict()["service"]["upstream_model"] == model.split("/", 1)[1]
    with claude.messages.stream(model=model, max_tokens=20, messages=[{"role": "user", "content": "hi"}]) as stream:
        start = next(e for e in stream if e.type == "message_start")
        final = stream.get_final_message()
    assert start.message.model == final.model == model
    chat = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    assert chat.model == model
    chunks = list(client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], stream=True))
    assert {chunk.model for chunk in chunks} == {model}
    assert client.responses.create(model=model, input="hi").model == model
    events = list(client.responses.create(model=model, input="hi", stream=True))
    assert {e.response.model for e in events if hasattr(e, "response")} == {model}


# --------------------------------------------------------------- (b) /v1/responses


def test_responses_plain(client, stack):
    before = posted(stack)
    response = client.responses.create(model="acme/small", instructions="Be brief.", input="hello responses")
    assert response.object == "response"
    assert response.status == "completed"
    assert response.output_text == "You said: hello responses"
    assert response.id.startswith("resp_")
    body = response.to_dict()
    assert body["provider"] == "acme"
    assert (body["usage"]["input_tokens"], body["usage"]["output_tokens"]) == (12, 4)
    cost = Decimal(body["service"]["cost_usd"])
    assert Decimal(str(body["usage"]["cost"])) == cost == expected_cost(pricing(stack, "acme/small"), input=12, output=4)
    assert before - posted(stack) == cost


def test_responses_streamed(client, stack):
    before = posted(stack)
    stream = client.responses.create(model="acme/small", input="one two three", stream=True)
    events = list(stream)
    assert events[0].type == "response.created"
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "You said: one two three"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    done = events[-1]
    assert done.type == "response.completed"
    assert done.response.output_text == text
    body = done.response.to_dict()
    cost = Decimal(body["service"]["cost_usd"])
    assert Decimal(str(body["usage"]["cost"])) == cost == expected_cost(pricing(stack, "acme/small"), input=7, output=5)
    assert before - posted(stack) == cost


@pytest.mark.parametrize("model", MODELS)
def test_responses_function_call_round_trip(client, model):
    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        }
    ]
    first = client.responses.create(model=model, input="weather in Paris?", tools=tools, tool_choice="required")
    call = first.output[-1]
    assert call.type == "function_call"
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "mock"}
    second = client.responses.create(
        model=model,
        tools=tools,
        input=[
            {"role": "user", "content": "weather in Paris?"},
            {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
        ],
    )
    assert second.output_text == "Tool result: sunny"

    streamed = list(client.responses.create(model=model, input="weather?", tools=tools, stream=True))
    done = [e for e in streamed if e.type == "response.function_call_arguments.done"]
    assert len(done) == 1 and json.loads(done[0].arguments) == {"city": "mock"}
    assert streamed[-1].response.output[-1].type == "function_call"


def test_responses_json_schema(client):
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    response = client.responses.create(
        model="acme/small",
        input="Ada, 36",
        text={"format": {"type": "json_schema", "name": "person", "schema": schema, "strict": True}},
    )
    assert json.loads(response.output_text) == {"name": "mock", "age": 1}
    assert response.text.format.type == "json_schema"


def test_responses_refuses_stored_state_and_built_in_tools(client):
    import openai

    with pytest.raises(openai.BadRequestError) as stored:
        client.responses.create(model="acme/small", input="hi", previous_response_id="resp_123")
    assert "stored" in stored.value.message
    with pytest.raises(openai.BadRequestError) as forced:
        client.responses.create(model="acme/small", input="hi", tools=[{"type": "web_search"}], tool_choice={"type": "web_search"})
    assert "web_search" in forced.value.message and "acme/small" in forced.value.message
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="nobody/nothing", input="hi")


def test_responses_takes_what_codex_sends(client, stack):
    """Codex's request shape (issue 34): `client_metadata` stays at the gateway,
    a namespace's functions and a custom tool are offered as functions, the
    optional hosted tool is left out and named in `service.warnings`."""
    response = client.responses.create(
        model="acme/small",
        input="patch it",
        tools=[
            {"type": "custom", "name": "apply_patch", "description": "Patch files."},
            {"type": "namespace", "name": "agents", "description": "Sub-agents.",
             "tools": [{"type": "function", "name": "spawn", "parameters": {"type": "object", "properties": {}}}]},
            {"type": "web_search", "external_web_access": False},
        ],
        extra_body={"client_metadata": {"x-codex-installation-id": "install-1"}, "prompt_cache_key": "k"},
    )
    sent = stack.last_upstream_request("/v1/chat/completions")["body"]
    assert "client_metadata" not in sent and "prompt_cache_key" not in sent
    assert [t["function"]["name"] for t in sent["tools"]] == ["apply_patch", "agents__spawn"]
    call = response.output[0]
    # The mock calls the first tool: the custom one, with its one string.
    assert (call.type, call.name, call.input) == ("custom_tool_call", "apply_patch", "mock")
    warnings = response.to_dict()["service"]["warnings"]
    assert len(warnings) == 1 and "web_search" in warnings[0]
    named = client.responses.create(
        model="acme/small",
        input="spawn one",
        tools=[{"type": "namespace", "name": "agents", "description": "Sub-agents.",
                "tools": [{"type": "function", "name": "spawn", "parameters": {"type": "object", "properties": {}}}]}],
    )
    assert named.output[0].to_dict()["namespace"] == "agents" and named.output[0].name == "spawn"


def test_an_unset_output_limit_is_the_models_own_maximum(client, stack):
    """Issue 34: a request without a limit (as Codex sends) gets the model's
    catalog maximum, not a flat 4,096; one above that maximum is refused
    before anything is held."""
    before = posted(stack)
    client.responses.create(model="anthropic/claude-haiku-4-5", input="write a long edit")
    assert stack.last_upstream_request("/v1/messages")["body"]["max_tokens"] == 64000
    models = client.models.list().to_dict()["data"]
    assert next(m for m in models if m["id"] == "anthropic/claude-haiku-4-5")["max_output_tokens"] == 64000
    # A model the catalog gives no maximum keeps ledger.default_max_output_tokens.
    client.chat.completions.create(model="acme/small", messages=[{"role": "user", "content": "hi"}])
    assert stack.last_upstream_request("/v1/chat/completions")["body"]["max_tokens"] == 4096
    import openai

    spent = before - posted(stack)
    with pytest.raises(openai.BadRequestError) as too_long:
        client.chat.completions.create(
            model="anthropic/claude-haiku-4-5", max_tokens=64001, messages=[{"role": "user", "content": "hi"}]
        )
    assert too_long.value.body["param"] == "max_tokens" and "64000" in too_long.value.message
    assert before - posted(stack) == spent, "a refused request holds and bills nothing"


# --------------------------------------------------------------- (c) prices and chunks


def test_cached_prompt_tokens_are_billed_at_the_cache_read_price(claude, client, stack):
    # Anthropic: 8 words + 4 = 12 prompt tokens, 8 read from and 2 written to the cache.
    price = pricing(stack, "anthropic/claude-haiku-4-5")
    assert Decimal(price["cache_read_per_mtok"]) < Decimal(price["input_per_mtok"])
    before = posted(stack)
    message = claude.messages.create(
        model="anthropic/claude-haiku-4-5",
        max_tokens=50,
        messages=[{"role": "user", "content": "one two three four five six seven eight"}],
        extra_body={"mock": {"cached_tokens": 8, "cache_write_tokens": 2}},
    )
    usage = message.usage
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (2, 8, 2)
    body = message.to_dict()
    cost = Decimal(body["service"]["cost_usd"])
    assert cost == expected_cost(price, input=2, cache_read=8, cache_write=2, output=10)
    breakdown = body["service"]["cost_breakdown"]
    # Beside the kinds: `provider_usd` and `fee_usd`, the billed total split (docs/billing.md).
    assert {kind: part["tokens"] for kind, part in breakdown.items() if isinstance(part, dict)} == {
        "input": 2,
        "cache_read": 8,
        "cache_write": 2,
        "output": 10,
    }
    assert Decimal(breakdown["cache_read"]["cost_usd"]) == Decimal(price["cache_read_per_mtok"]) * 8 / 10**6
    assert before - posted(stack) == cost

    # OpenAI-compatible, with the cache-read price set in config: chat completions.
    completion = client.chat.completions.create(
        model="acme/cached",
        messages=[{"role": "user", "content": "one two three four five six seven eight"}],
        extra_body={"mock": {"cached_tokens": 8}},
    )
    body = completion.to_dict()
    assert body["usage"]["prompt_tokens"] == 12
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 8
    # 4 × 0.50 + 8 × 0.05 (cache read) + 10 × 1.50 USD per Mtok.
    assert Decimal(body["service"]["cost_usd"]) == Decimal(4 * 500 + 8 * 50 + 10 * 1500) * NANO
    assert body["service"]["cost_breakdown"]["cache_read"] == {"tokens": 8, "cost_usd": "0.000000400000"}


def test_every_available_model_has_a_price(client, stack):
    with urllib.request.urlopen(
        urllib.request.Request(f"{stack.url}/v1/models", headers={"authorization": f"Bearer {stack.api_key}"})
    ) as r:
        models = json.load(r)["data"]
    assert len(models) > 1000
    # Unpriced models are left out of the list (they still answer by id).
    for model in models:
        assert model["pricing"] is not None, model["id"]
        assert model["service"]["pricing_source"]["name"], model["id"]
    assert sum(m["pricing"]["source"] == "price_table" for m in models) >= 1000


def test_streamed_chunks_carry_created(client):
    # The Anthropic adapter has no clock and leaves `created` 0 in streams.
    for model in MODELS:
        stream = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "one two three"}], stream=True
        )
        chunks = list(stream)
        assert chunks and all(chunk.created > 1_600_000_000 for chunk in chunks), model


def test_import_prices_refreshes_the_table(tmp_path):
    small = tmp_path / "prices.json"
    small.write_text(
        json.dumps(
            {
                "gpt-4o-mini": {
                    "litellm_provider": "openai",
                    "mode": "chat",
                    "input_cost_per_token": 1e-07,
                    "output_cost_per_token": 5e-07,
                    "cache_read_input_token_cost": 2.5e-08,
                },
                "text-embedding-3-small": {"litellm_provider": "openai", "mode": "embedding", "input_cost_per_token": 2e-08},
                "gpt-imported": {
                    "litellm_provider": "openai",
                    "mode": "chat",
                    "input_cost_per_token": 3e-07,
                    "output_cost_per_token": 1.2e-06,
                    "max_input_tokens": 64000,
                    "supports_prompt_caching": True,
                },
            }
        )
    )
    port = free_port()
    config = tmp_path / "tollgate.toml"
    table = tmp_path / "table.toml"
    config.write_text(f'listen = "127.0.0.1:{port}"\ndata_dir = "{tmp_path}/data"\n[catalog]\nprices_file = "{table}"\n')
    out = subprocess.run(
        [BIN, "catalog", "import-prices", str(small), "--config", str(config), "--release", "test file"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    line = next(l for l in out.splitlines() if "openai/gpt-4o-mini:" in l)
    assert line.startswith("changed") and line.endswith("-> in 0.1 / out 0.5 / cache read 0.025"), out
    assert "1 changed" in out
    # The chat model and the embedding model (it serves /v1/embeddings) join.
    assert "new from the file: 2 (openai 2)" in out, out
    assert 'operations = ["embeddings"]' in table.read_text()
    text = table.read_text()
    assert "MIT" in text and "Berri AI" in text and "test file" in text

    account = json.loads(
        subprocess.run(
            [BIN, "admin", "create-account", "--config", str(config), "--name", "p", "--json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    gateway = subprocess.Popen([BIN, "serve", "--config", str(config)])
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, gateway)
        listed = httpx.get(f"{url}/v1/models/openai/gpt-4o-mini", headers={"authorization": f"Bearer {account['api_key']}"}).json()
        assert listed["pricing"]["input_per_mtok"] == "0.100000"
        assert listed["pricing"]["cache_read_per_mtok"] == "0.025000"
        assert (listed["pricing"]["source"], listed["pricing"]["source_key"]) == ("price_table", "gpt-4o-mini")
        # Models the file lacks keep the built-in table's price.
        other = httpx.get(f"{url}/v1/models/openai/gpt-4o", headers={"authorization": f"Bearer {account['api_key']}"}).json()
        assert other["pricing"]["source"] == "price_table"
        # A chat model the catalog does not list joins it from the file.
        added = httpx.get(f"{url}/v1/models/openai/gpt-imported", headers={"authorization": f"Bearer {account['api_key']}"}).json()
        assert added["pricing"]["output_per_mtok"] == "1.200000"
        assert added["context_length"] == 64000
        assert added["service"]["capabilities"] == ["streaming", "caching"]
        assert added["service"]["pricing_source"]["release"] == "test file"
    finally:
        gateway.terminate()
        gateway.wait(timeout=10)
