"""The gateway fee as the official OpenAI SDK sees it (docs/billing.md): a
workspace on a plan with `request_fee_usd = "0.001"` pays the provider's cost
plus exactly 0.001 USD, itemised in `service.cost_breakdown`, and its wallet is
debited exactly the `usage.cost` shown."""

import json
from decimal import Decimal

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
