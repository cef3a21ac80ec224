"""The gateway fee as the official OpenAI SDK sees it (docs/billing.md): a
workspace on a plan with `request_fee_usd = "0.001"` pays the provider's cost
plus exactly 0.001 USD, itemised in `service.cost_breakdown`, and its wallet is
debited exactly the `usage.cost` shown. And spend controls: a key budget's
refusal as the SDK raises it."""

import json
import subprocess
import urllib.request
from decimal import Decimal

import openai
import pytest
from conftest import BIN
from openai import OpenAI


def posted(stack, workspace_id: str) -> Decimal:
    wallet = json.loads(stack.admin("wallet", "--workspace", workspace_id, "--json"))
    return Decimal(wallet["posted_usd"])


def test_the_fee_is_in_the_cost_the_sdk_returns(stack):
    account = json.loads(stack.admin("create-account", "--name", "fee", "--credit-usd", "1", "--json"))
    workspace_id = account["workspace_id"]
    stack.admin("plan", "set", "--workspace", workspace_id, "--plan", "metered")
    client = OpenAI(base_url=f"{stack.url}/v1", api_key=account["api_key"], max_retries=0)
    before = posted(stack, workspace_id)

    completion = client.chat.completions.create(
        model="acme/small", messages=[{"role": "user", "content": "what does the gateway add?"}]
    )

    body = completion.to_dict()
    usage = body["usage"]
    # acme/small: 0.50 and 1.50 USD per million input and output tokens.
    provider = (Decimal(usage["prompt_tokens"]) * Decimal("0.50") + Decimal(usage["completion_tokens"]) * Decimal("1.50")) / 10**6
    cost = Decimal(body["service"]["cost_usd"])
    assert cost == provider + Decimal("0.001")
    assert Decimal(str(usage["cost"])) == cost
    breakdown = body["service"]["cost_breakdown"]
    assert Decimal(breakdown["fee_usd"]) == Decimal("0.001")
    assert Decimal(breakdown["provider_usd"]) == provider
    assert before - posted(stack, workspace_id) == cost


def cli(stack, api_key: str, *args: str) -> dict:
    """Runs a control-plane CLI command (`tollgate ARGS --json`) as `api_key`."""
    out = subprocess.run(
        [BIN, *args, "--url", stack.url, "--api-key", api_key, "--json"], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def upstream_chats(stack) -> int:
    with urllib.request.urlopen(f"{stack.mock_url}/__mock/stats") as r:
        return json.load(r)["chat_requests"]


def test_a_key_budget_refusal_is_a_402_budget_exceeded_the_sdk_raises(stack):
    """Spend controls (docs/billing.md): a key's daily budget, set with the
    CLI, refuses a request whose worst case does not fit with 402
    `budget_exceeded` before any upstream call, as `openai.APIStatusError`."""
    account = json.loads(stack.admin("create-account", "--name", "budget", "--credit-usd", "1", "--json"))
    api_key = account["api_key"]
    # Enterprise has spend controls.
    stack.admin("plan", "set", "--workspace", account["workspace_id"], "--plan", "enterprise")
    key_id = cli(stack, api_key, "keys", "list")["keys"][0]["key_id"]
    limits = cli(
        stack, api_key, "budget", "set", "--scope", "key", "--key", key_id,
        "--period", "daily", "--limit-usd", "0.002", "--alerts", "80",
    )
    assert limits["keys"][0]["limit_usd"] == "0.002"
    assert limits["keys"][0]["alert_thresholds"] == [80]
    client = OpenAI(base_url=f"{stack.url}/v1", api_key=api_key, max_retries=0)
    ask = {"model": "acme/small", "messages": [{"role": "user", "content": "spend"}]}

    # ~0.0015 USD worst case (1,000 output tokens): it fits once.
    client.chat.completions.create(**ask, max_tokens=1000, extra_body={"mock": {"words": 1000}})
    before = upstream_chats(stack)
    with pytest.raises(openai.APIStatusError) as refused:
        client.chat.completions.create(**ask, max_tokens=1000)
    assert refused.value.status_code == 402
    assert refused.value.code == "budget_exceeded"
    assert refused.value.body["type"] == "billing_error"
    assert key_id in refused.value.message and "daily budget" in refused.value.message
    assert upstream_chats(stack) == before, "nothing went upstream"

    shown = cli(stack, api_key, "budget", "show")["keys"][0]
    assert Decimal(shown["spent_usd"]) + Decimal(shown["remaining_usd"]) + Decimal(shown["held_usd"]) == Decimal("0.002")
    removed = cli(stack, api_key, "budget", "remove", "--scope", "key", "--key", key_id)
    assert removed["keys"] == []
