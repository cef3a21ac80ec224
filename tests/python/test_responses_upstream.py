"""A model served only by OpenAI's Responses API (`adapter = "openai-responses"`),
called through the official OpenAI SDK's chat completions; and the mock's own
`/v1/responses`, read by the same SDK's typed Responses client, so the shape the
adapter is tested against is the one OpenAI's SDK parses."""

import json

from openai import OpenAI


def test_the_mocks_responses_api_parses_in_the_official_sdk(stack):
    upstream = OpenAI(base_url=f"{stack.mock_url}/v1", api_key="sk-primary", max_retries=0)
    whole = upstream.responses.create(model="gpt-9-pro", instructions="Be brief.", input="say hello")
    assert whole.status == "completed"
    assert whole.output_text == "You said: say hello"
    assert whole.usage.input_tokens > 0 and whole.usage.output_tokens == 4

    tools = [{"type": "function", "name": "weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
    called = upstream.responses.create(model="gpt-9-pro", input="weather?", tools=tools, tool_choice="required")
    call = next(item for item in called.output if item.type == "function_call")
    assert call.name == "weather" and json.loads(call.arguments) == {"city": "mock"}

    with upstream.responses.stream(model="gpt-9-pro", input="one two three") as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == "You said: one two three" == final.output_text

    cut = upstream.responses.create(model="gpt-9-pro", input="one two three four", max_output_tokens=2)
    assert cut.status == "incomplete" and cut.incomplete_details.reason == "max_output_tokens"


def test_chat_completions_reach_a_responses_only_model(client):
    answer = client.chat.completions.create(
        model="primary/pro",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "say hello"}],
    )
    assert answer.choices[0].message.content == "You said: say hello"
    assert answer.choices[0].finish_reason == "stop"
    service = answer.model_extra["service"]
    assert service["attempts"][0]["adapter"] == "openai-responses"
    # (2 + 4) + (2 + 4) prompt tokens at 15/Mtok, 4 completion tokens at 120/Mtok.
    assert service["cost_usd"] == "0.000660000"

    chunks = list(client.chat.completions.create(
        model="primary/pro", stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "one two three"}],
    ))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "You said: one two three"
    assert chunks[-1].usage.completion_tokens == 5

    tools = [{"type": "function", "function": {"name": "weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    called = client.chat.completions.create(
        model="primary/pro", tools=tools, tool_choice="required",
        messages=[{"role": "user", "content": "weather in Paris?"}],
    )
    call = called.choices[0].message.tool_calls[0]
    assert called.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "weather" and json.loads(call.function.arguments) == {"city": "mock"}
    followed = client.chat.completions.create(
        model="primary/pro", tools=tools,
        messages=[
            {"role": "user", "content": "weather in Paris?"},
            called.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ],
    )
    assert followed.choices[0].message.content == "Tool result: sunny"
