"""Checks that the official `stripe` Python package (16.1.0) talks to the
mock upstream's fake Stripe: create (with an idempotency key), retrieve and
list sessions, typed errors, events, and webhook verification with
`stripe.Webhook.construct_event` and `stripe.WebhookSignature.generate_signature_header`.

    python3 -m venv /tmp/stripe-venv && /tmp/stripe-venv/bin/pip install 'stripe==16.*'
    target/debug/tollgate-mock-upstream --listen 127.0.0.1:18931 &
    /tmp/stripe-venv/bin/python mock-upstream/tests/stripe_sdk_check.py http://127.0.0.1:18931
"""
import json, sys, threading, urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
import stripe

BASE = sys.argv[1]
print("stripe", stripe.VERSION)
client = stripe.StripeClient("sk_test_x", base_addresses={"api": BASE})

params = {
    "mode": "payment",
    "success_url": "http://app.local/ok?session={CHECKOUT_SESSION_ID}",
    "cancel_url": "http://app.local/cancel",
    "client_reference_id": "ws_1",
    "metadata": {"workspace_id": "ws_1", "kind": "topup"},
    "payment_intent_data": {"metadata": {"workspace_id": "ws_1"}},
    "line_items": [{
        "price_data": {"currency": "usd", "unit_amount": 1000, "product_data": {"name": "Top-up"}},
        "quantity": 2,
    }],
}
session = client.v1.checkout.sessions.create(params=params, options={"idempotency_key": "py-key-1"})
print("created", session.id, session.amount_total, session.currency, session.metadata.to_dict(), session.url)
assert session.amount_total == 2000 and session.status == "open" and session.metadata["workspace_id"] == "ws_1"
again = client.v1.checkout.sessions.create(params=params, options={"idempotency_key": "py-key-1"})
assert again.id == session.id
assert again.last_response.headers.get("Idempotent-Replayed") == "true"
try:
    client.v1.checkout.sessions.create(params={**params, "mode": "subscription"}, options={"idempotency_key": "py-key-1"})
    raise SystemExit("expected IdempotencyError")
except stripe.IdempotencyError as e:
    print("idempotency error:", type(e).__name__, e.http_status)
try:
    client.v1.checkout.sessions.create(params={"line_items": params["line_items"]})
    raise SystemExit("expected InvalidRequestError")
except stripe.InvalidRequestError as e:
    print("invalid:", e.param, e.user_message)
    assert e.param == "mode"
try:
    client.v1.checkout.sessions.retrieve("cs_test_missing")
except stripe.InvalidRequestError as e:
    print("missing:", e.http_status, e.code)
    assert e.http_status == 404 and e.code == "resource_missing"
try:
    stripe.StripeClient("pk_test_x", base_addresses={"api": BASE}).v1.checkout.sessions.retrieve(session.id)
except stripe.AuthenticationError as e:
    print("auth:", e.http_status)

got = client.v1.checkout.sessions.retrieve(session.id)
assert got.id == session.id and got.status == "open"

# A webhook receiver.
received = []
class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        received.append((body, self.headers["Stripe-Signature"]))
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
server = HTTPServer(("127.0.0.1", 0), Hook)
threading.Thread(target=server.serve_forever, daemon=True).start()
hook_url = f"http://127.0.0.1:{server.server_port}/v1/billing/stripe/webhook"

def control(path, body):
    req = urllib.request.Request(BASE + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    return json.load(urllib.request.urlopen(req))

control("/__stripe/webhook_endpoints", {"url": hook_url, "secret": "whsec_py", "secrets": ["whsec_py2"]})
done = control(f"/__stripe/checkout/sessions/{session.id}/complete", {"outcome": "paid"})
print("deliveries", done["deliveries"])
payload, sig_header = received[0]
for secret in ("whsec_py", "whsec_py2"):
    event = stripe.Webhook.construct_event(payload, sig_header, secret)
    assert event.type == "checkout.session.completed", event.type
    assert event.data.object.id == session.id and event.data.object.payment_status == "paid"
try:
    stripe.Webhook.construct_event(payload, sig_header, "whsec_wrong")
    raise SystemExit("expected SignatureVerificationError")
except stripe.SignatureVerificationError:
    pass
print("construct_event ok:", event.id, event.type)

# The SDK's own signer agrees with the fake's header format.
header = stripe.WebhookSignature.generate_signature_header(payload.decode("utf-8"), "whsec_py")
assert stripe.Webhook.construct_event(payload, header, "whsec_py").id == event.id
t = int(sig_header.split(",")[0][2:])
mine = stripe.WebhookSignature.generate_signature_header(payload.decode("utf-8"), "whsec_py", timestamp=t)
assert sig_header.startswith(mine + ","), (sig_header, mine)
print("generate_signature_header ok:", mine[:40] + "...")

ev = client.v1.events.retrieve(event.id)
assert ev.type == "checkout.session.completed"
listed = client.v1.events.list()
assert listed.data[0].id == event.id
by_pi = client.v1.checkout.sessions.list(params={"payment_intent": done["session"]["payment_intent"]})
assert [s.id for s in by_pi.data] == [session.id]
print("events and list ok")

sub = client.v1.checkout.sessions.create(params={
    "mode": "subscription",
    "success_url": "http://app.local/ok",
    "metadata": {"workspace_id": "ws_2"},
    "subscription_data": {"metadata": {"plan": "pro"}},
    "customer_email": "a@example.com",
    "line_items": [{"price_data": {"currency": "usd", "unit_amount": 2500, "product_data": {"name": "Pro"},
                                   "recurring": {"interval": "month"}}, "quantity": 1}],
})
done = control(f"/__stripe/checkout/sessions/{sub.id}/complete", {})
types = [stripe.Webhook.construct_event(p, h, "whsec_py").type for p, h in received[1:]]
print("subscription events", types)
assert types == ["customer.subscription.created", "checkout.session.completed", "invoice.paid"]
print("ALL OK")
