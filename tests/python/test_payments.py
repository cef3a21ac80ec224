"""Top-ups and subscriptions through Stripe Checkout (docs/billing.md, "Payments"),
against the fake Stripe in mock-upstream. The official `stripe` package reads the
sessions the gateway opened and signs the webhook deliveries these tests make."""

import json
import random
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import httpx
import pytest
import stripe

from conftest import STRIPE_OLD_WEBHOOK_SECRET, STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET
from test_actors import OpFailed, op


def sign(payload: str, secret: str, timestamp: int | None = None) -> str:
    """A `Stripe-Signature` header made by the stripe package's own signer."""
    return stripe.WebhookSignature.generate_signature_header(payload, secret, timestamp=timestamp)


def stripe_client(stack) -> stripe.StripeClient:
    return stripe.StripeClient(STRIPE_SECRET_KEY, base_addresses={"api": stack.mock_url})


@pytest.fixture(scope="module")
def webhook(stack) -> str:
    url = f"{stack.url}/v1/billing/stripe/webhook"
    response = httpx.post(
        f"{stack.mock_url}/__stripe/webhook_endpoints", json={"url": url, "secret": STRIPE_WEBHOOK_SECRET}
    )
    assert response.status_code == 200, response.text
    return url


def account(stack, name: str, credit: str = "1") -> tuple[str, str]:
    created = json.loads(stack.admin("create-account", "--name", name, "--credit-usd", credit, "--json"))
    return created["workspace_id"], created["api_key"]


def posted(stack, workspace_id: str) -> Decimal:
    return Decimal(json.loads(stack.admin("wallet", "--workspace", workspace_id, "--json"))["posted_usd"])


def fake(stack, path: str, body: dict | None = None) -> dict:
    response = httpx.post(f"{stack.mock_url}/__stripe/{path}", json=body or {}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def deliver(url: str, payload: str, header: str) -> httpx.Response:
    return httpx.post(
        url, content=payload, headers={"Stripe-Signature": header, "Content-Type": "application/json"}, timeout=60
    )


def verify_ledger(stack) -> None:
    stack.admin("ledger-verify")


def test_a_paid_topup_credits_the_wallet_once(stack, webhook):
    workspace_id, key = account(stack, "topup")
    before = posted(stack, workspace_id)

    topup = op(stack, "billing.topups.create", {"amount_usd": "25"}, key)
    assert topup["checkout_url"] and topup["session_id"].startswith("cs_")
    session = stripe_client(stack).v1.checkout.sessions.retrieve(topup["session_id"])
    assert session.mode == "payment" and session.amount_total == 2500 and session.currency == "usd"
    assert session.client_reference_id == workspace_id
    assert session.metadata.to_dict()["workspace_id"] == workspace_id
    # The create carried an Idempotency-Key: our checkout id.
    sent = httpx.get(f"{stack.mock_url}/__mock/requests").json()
    create = [r for r in sent if r["method"] == "POST" and r["path"] == "/v1/checkout/sessions"][-1]
    headers = {k.lower(): v for k, v in create["headers"].items()}
    assert headers["idempotency-key"] == topup["checkout"]["id"]
    assert posted(stack, workspace_id) == before, "opening a checkout moves no money"

    done = fake(stack, f"checkout/sessions/{topup['session_id']}/complete", {"outcome": "paid"})
    assert [d["status"] for d in done["deliveries"]] == [200]
    assert posted(stack, workspace_id) == before + 25

    # Stripe redelivers: nothing more.
    event_id = done["events"][0]["id"]
    again = fake(stack, f"events/{event_id}/deliver")
    assert [d["status"] for d in again["deliveries"]] == [200]
    assert posted(stack, workspace_id) == before + 25
    listed = op(stack, "billing.topups.list", {}, key)["checkouts"]
    assert listed[0]["state"] == "paid" and Decimal(listed[0]["amount_usd"]) == 25
    verify_ledger(stack)


def test_amounts_outside_the_bounds_are_refused(stack, webhook):
    _, key = account(stack, "bounds")
    for amount in ("1", "10001", "12.345", "-5", "ten"):
        with pytest.raises(OpFailed) as refused:
            op(stack, "billing.topups.create", {"amount_usd": amount}, key)
        assert refused.value.error["code"] == -32602, refused.value.error
        assert amount in refused.value.error["message"]


def test_a_webhook_storm_credits_each_session_exactly_once(stack, webhook):
    workspace_id, key = account(stack, "storm")
    before = posted(stack, workspace_id)
    amounts = [Decimal(5) + Decimal(i) / 4 for i in range(100)]  # 5.00, 5.25, … whole cents
    sessions = [op(stack, "billing.topups.create", {"amount_usd": str(a)}, key)["session_id"] for a in amounts]
    events = [
        fake(stack, f"checkout/sessions/{s}/complete", {"outcome": "paid", "deliver": False})["events"][0]
        for s in sessions
    ]

    deliveries = []
    for event in events:
        payload = json.dumps(event)
        for _ in range(8):  # every event several times over
            deliveries.append(("good", payload, sign(payload, STRIPE_WEBHOOK_SECRET)))
        stale = int(time.time()) - 400
        deliveries.append(("bad", payload, sign(payload, STRIPE_WEBHOOK_SECRET, stale)))
        deliveries.append(("bad", payload.replace('"paid"', '"paid" '), sign(payload, STRIPE_WEBHOOK_SECRET)))
    assert len(deliveries) == 1000
    random.Random(7).shuffle(deliveries)

    def send(delivery):
        kind, payload, header = delivery
        return kind, deliver(webhook, payload, header).status_code

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(send, deliveries))

    assert all(status == 200 for kind, status in results if kind == "good")
    assert all(status == 400 for kind, status in results if kind == "bad")
    assert posted(stack, workspace_id) == before + sum(amounts)
    checkouts = op(stack, "billing.topups.list", {"limit": 500}, key)["checkouts"]
    assert sorted(c["state"] for c in checkouts) == ["paid"] * 100
    verify_ledger(stack)


def test_forged_stale_and_foreign_deliveries_change_nothing(stack, webhook):
    workspace_id, key = account(stack, "forged")
    topup = op(stack, "billing.topups.create", {"amount_usd": "10"}, key)
    event = fake(stack, f"checkout/sessions/{topup['session_id']}/complete", {"deliver": False})["events"][0]
    payload = json.dumps(event)
    before = posted(stack, workspace_id)

    bad = {
        "wrong secret": sign(payload, "whsec_someone_else"),
        "older than 300 s": sign(payload, STRIPE_WEBHOOK_SECRET, int(time.time()) - 301),
        "no signature": "",
        "garbage": "t=abc,v1=zz",
    }
    for why, header in bad.items():
        response = deliver(webhook, payload, header)
        assert response.status_code == 400, (why, response.text)
        assert response.json()["error"]["code"] == "webhook_refused"
    foreign = json.loads(payload)
    foreign["id"] = "evt_foreign"
    foreign["data"]["object"]["id"] = "cs_test_never_created_by_the_gateway"
    foreign["data"]["object"]["metadata"] = {}
    foreign_payload = json.dumps(foreign)
    response = deliver(webhook, foreign_payload, sign(foreign_payload, STRIPE_WEBHOOK_SECRET))
    assert response.status_code == 400 and "not created by this gateway" in response.text
    assert posted(stack, workspace_id) == before

    # Mid-rotation, a delivery signed with the previous secret is genuine.
    response = deliver(webhook, payload, sign(payload, STRIPE_OLD_WEBHOOK_SECRET))
    assert response.status_code == 200, response.text
    assert posted(stack, workspace_id) == before + 10


def test_a_refund_debits_and_a_dispute_holds_top_ups(stack, webhook):
    workspace_id, key = account(stack, "refund")
    topup = op(stack, "billing.topups.create", {"amount_usd": "20"}, key)
    done = fake(stack, f"checkout/sessions/{topup['session_id']}/complete", {"outcome": "paid"})
    payment_intent = done["session"]["payment_intent"]
    before = posted(stack, workspace_id)

    refund = fake(stack, f"charges/{payment_intent}/refund", {"amount": 500})
    assert [d["status"] for d in refund["deliveries"]] == [200]
    assert posted(stack, workspace_id) == before - 5
    fake(stack, f"events/{refund['events'][0]['id']}/deliver")
    assert posted(stack, workspace_id) == before - 5, "a redelivered refund debits nothing more"
    fake(stack, f"charges/{payment_intent}/refund", {"amount": 300})
    assert posted(stack, workspace_id) == before - 8, "the running total grew by 3 USD"
    verify_ledger(stack)

    dispute = fake(stack, f"charges/{payment_intent}/dispute")
    assert [d["status"] for d in dispute["deliveries"]] == [200]
    with pytest.raises(OpFailed) as held:
        op(stack, "billing.topups.create", {"amount_usd": "10"}, key)
    assert "disputed" in str(held.value)
    stack.admin("payments", "release", "--workspace", workspace_id)
    assert op(stack, "billing.topups.create", {"amount_usd": "10"}, key)["session_id"]


def test_a_refund_before_its_payment_is_delivered_again_later(stack, webhook):
    workspace_id, key = account(stack, "early-refund")
    topup = op(stack, "billing.topups.create", {"amount_usd": "15"}, key)
    done = fake(stack, f"checkout/sessions/{topup['session_id']}/complete", {"deliver": False})
    refund = fake(stack, f"charges/{done['session']['payment_intent']}/refund", {"amount": 1500, "deliver": False})
    before = posted(stack, workspace_id)
    payload = json.dumps(refund["events"][0])
    response = deliver(webhook, payload, sign(payload, STRIPE_WEBHOOK_SECRET))
    assert response.status_code == 409, response.text
    fake(stack, f"events/{done['events'][0]['id']}/deliver")
    assert posted(stack, workspace_id) == before + 15
    response = deliver(webhook, payload, sign(payload, STRIPE_WEBHOOK_SECRET))
    assert response.status_code == 200, response.text
    assert posted(stack, workspace_id) == before
    verify_ledger(stack)


def test_a_pro_subscription_lifts_the_monthly_limit_and_ends_on_free(stack, webhook):
    from openai import OpenAI, RateLimitError

    workspace_id, key = account(stack, "subscriber")
    assert op(stack, "billing.plan.get", {}, key)["plan"]["id"] == "free"
    client = OpenAI(base_url=f"{stack.url}/v1", api_key=key, max_retries=0)
    ask = lambda: client.chat.completions.create(model="acme/small", messages=[{"role": "user", "content": "hi"}])
    # Free's 1,000 requests this month, used up.
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda _: ask(), range(1000)))
    with pytest.raises(RateLimitError) as limited:
        ask()
    assert limited.value.body["code"] == "plan_limit_reached"

    change = op(stack, "billing.plan.change", {"plan": "pro"}, key)
    assert change["plan"]["id"] == "free", "nothing changes before the payment"
    session = stripe_client(stack).v1.checkout.sessions.retrieve(change["checkout"]["session_id"])
    assert session.mode == "subscription" and session.amount_total == 2900

    done = fake(stack, f"checkout/sessions/{session.id}/complete", {"outcome": "paid"})
    assert [e["type"] for e in done["events"]] == [
        "customer.subscription.created",
        "checkout.session.completed",
        "invoice.paid",
    ]
    assert all(d["status"] == 200 for d in done["deliveries"]), done["deliveries"]
    assert op(stack, "billing.plan.get", {}, key)["plan"]["id"] == "pro"
    time.sleep(1.1)  # the data plane's plan cache
    for _ in range(3):
        ask()  # Free's limit no longer applies

    subscription = done["session"]["subscription"]
    fake(stack, f"subscriptions/{subscription}/renew")
    fake(stack, f"subscriptions/{subscription}/cancel", {"at_period_end": True})
    assert op(stack, "billing.plan.get", {}, key)["plan"]["id"] == "pro", "it runs to the period's end"
    ended = fake(stack, f"subscriptions/{subscription}/end_period")
    assert [e["type"] for e in ended["events"]] == ["customer.subscription.deleted"]
    assert op(stack, "billing.plan.get", {}, key)["plan"]["id"] == "free"

    # A late, older `updated` (still active), delivered as a new event, does not
    # bring the plan back.
    updated = [
        e
        for e in fake_events(stack)
        if e["type"] == "customer.subscription.updated" and e["data"]["object"]["id"] == subscription
    ][0]
    updated["id"] += "_late"
    payload = json.dumps(updated)
    assert deliver(webhook, payload, sign(payload, STRIPE_WEBHOOK_SECRET)).status_code == 200
    assert op(stack, "billing.plan.get", {}, key)["plan"]["id"] == "free"


def fake_events(stack) -> list[dict]:
    return httpx.get(f"{stack.mock_url}/__stripe/events").json()
