"""Skills over HTTP: `tollgate/summarize` against the mock upstream. Its model
call is billed to the caller exactly once (the wallet moves by the cost the
run reports, and the request log has one new row, for that model call); with
an empty wallet the run answers 402 and the mock receives nothing. SSE runs
report progress, then the result."""

import json
import os
import subprocess
import urllib.request

import httpx
import pytest

from conftest import BIN


def cli(stack, *args: str, key: str) -> dict:
    env = {**os.environ, "TOLLGATE_URL": stack.url, "TOLLGATE_API_KEY": key}
    out = subprocess.run([BIN, *args, "--json"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, f"tollgate {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}"
    return json.loads(out.stdout)


def nanos(usd: str) -> int:
    whole, _, fraction = usd.partition(".")
    return int(whole) * 1_000_000_000 + int((fraction + "0" * 9)[:9])


def mock_chat_requests(stack) -> int:
    with urllib.request.urlopen(f"{stack.mock_url}/__mock/stats") as r:
        return json.load(r)["chat_requests"]


@pytest.fixture(scope="module")
def summarize(stack):
    cli(stack, "install", "tollgate/summarize", key=stack.api_key)
    yield
    subprocess.run([BIN, "uninstall", "summarize", "--url", stack.url, "--api-key", stack.api_key], capture_output=True)


def run(stack, key: str, body: dict, **kwargs) -> httpx.Response:
    return httpx.post(
        f"{stack.url}/v1/skills/summarize",
        json=body,
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
        **kwargs,
    )


def test_a_skill_run_bills_its_model_call_exactly_once(stack, summarize):
    before = cli(stack, "wallet", key=stack.api_key)
    usage_before = cli(stack, "usage", key=stack.api_key)["entries"]
    answer = run(stack, stack.api_key, {"input": {"text": "The quick brown fox jumps over the lazy dog.", "model": "acme/small"}})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert isinstance(body["output"]["summary"], str) and body["output"]["summary"]
    service = body["service"]
    assert service["request_id"] == answer.headers["x-request-id"]
    [model_call] = service["model_calls"]
    assert model_call["provider"] == "acme" and model_call["model"] == "acme/small"
    assert model_call["cost_usd"] == service["cost_usd"] and nanos(service["cost_usd"]) > 0

    after = cli(stack, "wallet", key=stack.api_key)
    assert nanos(before["posted_usd"]) - nanos(after["posted_usd"]) == nanos(service["cost_usd"])
    assert after["pending_usd"] == before["pending_usd"], "no hold left behind"
    new = [e for e in cli(stack, "usage", key=stack.api_key)["entries"] if e not in usage_before]
    chats = [e for e in new if e["kind"] == "chat"]
    assert [e["request_id"] for e in chats] == [model_call["request_id"]], "one billed row: the model call"
    assert nanos(chats[0]["cost_usd"]) == nanos(service["cost_usd"])
    assert chats[0]["parent_request_id"] == service["request_id"], "the model call names its skill run"
    [run_row] = [e for e in new if e["kind"] == "skill_run"]
    assert run_row["request_id"] == service["request_id"] and run_row["model"] == "summarize__run"
    assert nanos(run_row["cost_usd"]) == 0 and run_row["status"] == 200


def test_an_empty_wallet_answers_402_and_nothing_goes_upstream(stack):
    signup = httpx.post(
        f"{stack.url}/a2a",
        headers={"A2A-Version": "1.0"},
        json={"jsonrpc": "2.0", "id": 1, "method": "accounts/signup",
              "params": {"name": "broke", "email": "broke@skills.test"}},
    ).json()["result"]
    key = signup["api_key"]
    assert cli(stack, "wallet", key=key)["available_usd"] in ("0", "0.000000000")
    cli(stack, "install", "tollgate/summarize", key=key)
    upstream_before = mock_chat_requests(stack)
    answer = run(stack, key, {"input": {"text": "words", "model": "acme/small"}})
    assert answer.status_code == 402, answer.text
    error = answer.json()["error"]
    assert error["code"] == "insufficient_balance"
    assert "model call" in error["message"]
    assert mock_chat_requests(stack) == upstream_before, "the mock recorded no call"


def test_a_budget_refusing_the_skills_model_call_answers_budget_exceeded(stack):
    def a2a(key: str | None, method: str, params: dict) -> dict:
        headers = {"A2A-Version": "1.0"} | ({"Authorization": f"Bearer {key}"} if key else {})
        answer = httpx.post(f"{stack.url}/a2a", headers=headers,
                            json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).json()
        assert "result" in answer, answer
        return answer["result"]

    signup = a2a(None, "accounts/signup", {"name": "capped", "email": "capped@skills.test"})
    key = signup["api_key"]
    stack.admin("credit", "--workspace", signup["workspace_id"], "--usd", "1")
    stack.admin("plan", "set", "--workspace", signup["workspace_id"], "--plan", "enterprise")
    # A spend control no model request fits: one nano-dollar per request.
    a2a(key, "billing/limits.set", {"scope": "workspace", "period": "monthly", "limit_usd": "1",
                                    "max_request_usd": "0.000000001"})
    cli(stack, "install", "tollgate/summarize", key=key)
    upstream_before = mock_chat_requests(stack)
    answer = run(stack, key, {"input": {"text": "words", "model": "acme/small"}})
    assert answer.status_code == 402, answer.text
    # The budget refused it, not the wallet (which holds 1 USD).
    assert answer.json()["error"]["code"] == "budget_exceeded", answer.text
    assert mock_chat_requests(stack) == upstream_before, "the mock recorded no call"


def test_bad_input_unknown_installs_and_tool_servers_get_clear_errors(stack, summarize):
    missing = run(stack, stack.api_key, {"input": {"text": "no model"}})
    assert missing.status_code == 400 and "invalid input" in missing.json()["error"]["message"]
    not_object = run(stack, stack.api_key, {"input": [1, 2]})
    assert not_object.status_code == 400
    nowhere = httpx.post(f"{stack.url}/v1/skills/nothing", json={"input": {}},
                         headers={"Authorization": f"Bearer {stack.api_key}"})
    assert nowhere.status_code == 404
    unauthenticated = httpx.post(f"{stack.url}/v1/skills/summarize", json={"input": {}})
    assert unauthenticated.status_code == 401


def test_a_streamed_run_reports_progress_then_the_result(stack, summarize):
    events = []
    with httpx.stream(
        "POST",
        f"{stack.url}/v1/skills/summarize",
        json={"input": {"text": "Streaming shows each model call.", "model": "acme/small"}, "stream": True},
        headers={"Authorization": f"Bearer {stack.api_key}"},
        timeout=30,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                events.append((name, line[len("data: "):]))
                name = None
    kinds = [name for name, _ in events]
    assert kinds == ["progress", "result", None], events
    progress = json.loads(events[0][1])["model_call"]
    result = json.loads(events[1][1])
    assert result["service"]["model_calls"][0]["request_id"] == progress["request_id"]
    assert result["output"]["summary"]
    assert events[2][1] == "[DONE]"
